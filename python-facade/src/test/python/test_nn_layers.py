"""torch.nn's activations, pooling layers, Flatten/Unflatten, losses and batch normalization: each against torch.nn.functional
or the formula on torch tensors, and on distributed tensors (dtorch.distribute_module, inputs split on the batch)
against the same module on torch tensors, running statistics and gradients included."""

import copy
import math

import dtorch
import torch
import torch.nn as nn
import torch.nn.functional as F
from dtorch import Shard
from _testing import raises, run

MESH = dtorch.init_device_mesh("cpu", (4,))


def same(got, want, what="", atol=1e-6):
    value = got.full_tensor() if isinstance(got, dtorch.Tensor) else got
    assert value.shape == want.shape and value.dtype == want.dtype, (what, value.shape, want.shape, value.dtype, want.dtype)
    assert torch.allclose(value, want, rtol=1e-5, atol=atol), (what, (value - want).abs().max().item())


def test_activations_match_the_functional_api_and_their_formulas():
    torch.manual_seed(2)
    x = torch.randn(3, 4, 6)
    same(nn.Tanh()(x), torch.tanh(x), "Tanh")
    same(nn.Sigmoid()(x), 1 / (1 + torch.exp(-x)), "Sigmoid")
    same(nn.Softmax(dim=-1)(x), torch.exp(x) / torch.exp(x).sum(-1, keepdim=True), "Softmax")
    same(nn.LogSoftmax(dim=1)(x), F.log_softmax(x, dim=1), "LogSoftmax")
    same(nn.Softmax()(x), F.softmax(x, dim=0), "Softmax of a 3-D input without dim: torch's legacy choice, 0")
    same(nn.Softmax()(x[0]), F.softmax(x[0], dim=1), "Softmax of a 2-D input without dim: 1")
    same(nn.LeakyReLU(0.2)(x), torch.where(x >= 0, x, x * 0.2), "LeakyReLU")
    same(nn.ELU(0.5)(x), torch.where(x > 0, x, (torch.exp(x) - 1) * 0.5), "ELU")
    same(nn.Softplus(beta=2.0)(x), torch.log(1 + torch.exp(x * 2.0)) / 2.0, "Softplus", atol=1e-5)
    same(nn.Hardtanh(-0.5, 0.5)(x), torch.clamp(x, -0.5, 0.5), "Hardtanh")
    same(nn.ReLU6()(x * 4), torch.clamp(x * 4, 0, 6), "ReLU6")
    same(nn.GLU(dim=-1)(x), x[..., :3] * torch.sigmoid(x[..., 3:]), "GLU")
    same(nn.Mish()(x), x * torch.tanh(F.softplus(x)), "Mish", atol=1e-5)
    same(nn.Hardswish()(x), x * torch.clamp(x + 3, 0, 6) / 6, "Hardswish")
    same(nn.Hardsigmoid()(x), torch.clamp(x + 3, 0, 6) / 6, "Hardsigmoid")
    raises(ValueError, nn.Hardtanh, 1.0, 1.0, contains="max_val must be greater than min_val")
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)" and repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"


def test_pooling_flatten_and_unflatten_match_the_functional_api():
    torch.manual_seed(3)
    x = torch.randn(2, 3, 8, 8)
    same(nn.MaxPool2d(2)(x), F.max_pool2d(x, 2), "MaxPool2d")
    same(nn.MaxPool2d(3, stride=2, padding=1)(x), F.max_pool2d(x, 3, 2, 1), "MaxPool2d strided")
    values, indices = nn.MaxPool2d(2, return_indices=True)(x)
    same(values, F.max_pool2d(x, 2), "MaxPool2d values")
    assert indices.shape == (2, 3, 4, 4) and indices.dtype == torch.int64
    same(nn.AvgPool2d(2)(x), x.reshape(2, 3, 4, 2, 4, 2).mean((3, 5)), "AvgPool2d by hand")
    same(nn.AvgPool2d(3, 1, 1, count_include_pad=False)(x), F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), "AvgPool2d")
    same(nn.AdaptiveAvgPool2d(1)(x), x.mean((2, 3), keepdim=True), "AdaptiveAvgPool2d(1)")
    same(nn.AdaptiveAvgPool2d((None, 2))(x), F.adaptive_avg_pool2d(x, (8, 2)), "AdaptiveAvgPool2d keeping a size")
    same(nn.AdaptiveMaxPool2d(2)(x), F.adaptive_max_pool2d(x, 2), "AdaptiveMaxPool2d")
    line = x.reshape(2, 3, 64)
    same(nn.MaxPool1d(4)(line), line.reshape(2, 3, 16, 4).amax(-1), "MaxPool1d by hand")
    same(nn.AvgPool1d(4)(line), line.reshape(2, 3, 16, 4).mean(-1), "AvgPool1d by hand")
    same(nn.AdaptiveAvgPool1d(4)(line), line.reshape(2, 3, 4, 16).mean(-1), "AdaptiveAvgPool1d by hand")
    same(nn.AdaptiveMaxPool1d(4)(line), line.reshape(2, 3, 4, 16).amax(-1), "AdaptiveMaxPool1d by hand")
    assert nn.Flatten()(x).shape == (2, 192) and nn.Flatten(0, 1)(x).shape == (6, 8, 8)
    same(nn.Unflatten(1, (3, 64))(nn.Flatten()(x)), line, "Unflatten")
    raises(TypeError, nn.Unflatten, 1, 3, contains="unflattened_size must be tuple of ints")
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 5))
    assert model(x).shape == (2, 5)


def test_losses_match_the_functional_api_with_their_settings():
    torch.manual_seed(4)
    logits = torch.randn(6, 5, 3)
    target = torch.randint(0, 5, (6, 3))
    weight = torch.rand(5) + 0.5
    loss = nn.CrossEntropyLoss(weight=weight, ignore_index=2, label_smoothing=0.1)
    same(loss(logits, target), F.cross_entropy(logits, target, weight, ignore_index=2, label_smoothing=0.1), "CrossEntropyLoss")
    assert [n for n, _ in loss.named_buffers()] == ["weight"] and list(loss.state_dict()) == ["weight"]
    same(nn.CrossEntropyLoss(reduction="sum")(logits, target), F.cross_entropy(logits, target, reduction="sum"), "sum")
    same(nn.CrossEntropyLoss(reduce=False)(logits, target), F.cross_entropy(logits, target, reduction="none"), "reduce=False")
    same(nn.CrossEntropyLoss(size_average=False)(logits, target), F.cross_entropy(logits, target, reduction="sum"), "size_average")
    same(nn.NLLLoss(weight=weight)(F.log_softmax(logits, 1), target), F.cross_entropy(logits, target, weight), "NLLLoss")
    a, b = torch.randn(4, 7), torch.randn(4, 7)
    same(nn.MSELoss()(a, b), ((a - b) ** 2).mean(), "MSELoss")
    same(nn.L1Loss(reduction="none")(a, b), (a - b).abs(), "L1Loss")
    p = torch.rand(4, 7)
    pos = torch.rand(7) + 0.5
    same(nn.BCEWithLogitsLoss(pos_weight=pos)(a, p), F.binary_cross_entropy_with_logits(a, p, pos_weight=pos), "BCEWithLogitsLoss")
    raises(ValueError, nn.MSELoss(reduction="avg"), a, b, contains="is not a valid value for reduction")


def batch_norm_by_hand(x, mean, var, module):
    shape = [1, -1] + [1] * (x.dim() - 2)
    return (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + module.eps) * module.weight.reshape(shape) \
        + module.bias.reshape(shape)


def test_batch_norm_normalizes_with_batch_statistics_and_tracks_running_ones():
    torch.manual_seed(5)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.rand(3) + 0.5)
        bn.bias.copy_(torch.randn(3))
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    x = torch.randn(4, 3, 5, 5) * 2 + 1
    dims = (0, 2, 3)
    same(bn(x), batch_norm_by_hand(x, x.mean(dims), x.var(dims, unbiased=False), bn), "training", atol=1e-5)
    same(bn.running_mean, x.mean(dims) * 0.1, "running mean after one batch")
    same(bn.running_var, torch.ones(3) * 0.9 + x.var(dims, unbiased=True) * 0.1, "running var after one batch", atol=1e-5)
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    same(bn(x), batch_norm_by_hand(x, bn.running_mean, bn.running_var, bn), "evaluation", atol=1e-5)
    cumulative = nn.BatchNorm1d(3, momentum=None, affine=False)
    batches = [torch.randn(8, 3), torch.randn(8, 3) + 2]
    for batch in batches:
        cumulative(batch)
    same(cumulative.running_mean, (batches[0].mean(0) + batches[1].mean(0)) / 2, "a cumulative average with momentum None")
    assert nn.BatchNorm1d(3)(torch.randn(5, 3, 7)).shape == (5, 3, 7)
    raises(ValueError, nn.BatchNorm2d(3), torch.randn(4, 3, 5), contains="expected 4D input (got 3D input)")
    untracked = nn.BatchNorm1d(3, track_running_stats=False)
    assert untracked.running_mean is None and untracked.eval()(batches[1]).shape == (8, 3)


def test_layers_run_on_distributed_tensors_with_the_plain_modules_values():
    torch.manual_seed(6)
    x = torch.randn(8, 3, 6, 6)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.LeakyReLU(0.1), nn.MaxPool2d(2),
                          nn.AvgPool2d(3, 1, 1), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 5), nn.Tanh(),
                          nn.LogSoftmax(dim=1))
    plain = copy.deepcopy(model)
    dtorch.distribute_module(model, MESH)
    dx = dtorch.distribute_tensor(x, MESH, [Shard(0)])
    for step in range(2):
        same(model(dx), plain(x), "the forward in training, step %d" % step, atol=1e-5)
    bn, plain_bn = model[1], plain[1]
    same(bn.running_mean, plain_bn.running_mean, "running mean", atol=1e-6)
    same(bn.running_var, plain_bn.running_var, "running var", atol=1e-5)
    assert bn.num_batches_tracked.full_tensor().item() == 2
    model.eval()
    plain.eval()
    same(model(dx), plain(x), "the forward in evaluation", atol=1e-5)


def test_losses_differentiate_on_distributed_tensors_like_torch():
    torch.manual_seed(7)
    logits = torch.randn(8, 5, 3)
    target = torch.randint(0, 5, (8, 3))
    probabilities = torch.softmax(torch.randn(8, 5, 3), 1)
    weight = torch.rand(5) + 0.5
    for loss, y in [(nn.CrossEntropyLoss(), target),
                    (nn.CrossEntropyLoss(weight=weight, ignore_index=1, label_smoothing=0.2), target),
                    (nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.1), probabilities),
                    (nn.NLLLoss(reduction="none"), target)]:
        leaf = logits.clone().requires_grad_(True)
        want = loss(leaf, y)
        want.sum().backward()
        dleaf = dtorch.distribute_tensor(logits, MESH, [Shard(0)]).requires_grad_(True)
        dloss = copy.deepcopy(loss)
        dtorch.distribute_module(dloss, MESH)
        got = dloss(dleaf, dtorch.distribute_tensor(y, MESH, [Shard(0)]))
        same(got, want.detach(), repr(loss), atol=1e-5)
        got.sum().backward()
        same(dleaf.grad, leaf.grad, repr(loss) + ": the logits' gradient", atol=1e-6)
    assert math.isfinite(logits.sum().item())


def test_conv1d_and_conv3d_match_the_functional_api():
    torch.manual_seed(9)
    line = torch.randn(2, 4, 11)
    conv = nn.Conv1d(4, 6, 3, stride=2, padding=1, bias=False)
    assert conv.weight.shape == (6, 4, 3) and conv.kernel_size == (3,) and conv.bias is None
    same(conv(line), F.conv1d(line, conv.weight, None, 2, 1), "Conv1d", atol=1e-5)
    assert nn.Conv1d(4, 4, 3, padding="same", groups=2)(line).shape == (2, 4, 11)
    reflect = nn.Conv1d(4, 2, 3, padding=1, padding_mode="reflect")
    same(reflect(line), F.conv1d(F.pad(line, [1, 1], mode="reflect"), reflect.weight, reflect.bias), "Conv1d reflect", atol=1e-5)
    assert repr(conv) == "Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), bias=False)"
    volume = torch.randn(1, 2, 4, 5, 6)
    conv3 = nn.Conv3d(2, 3, (1, 3, 3), padding=(0, 1, 1))
    same(conv3(volume), F.conv3d(volume, conv3.weight, conv3.bias, 1, (0, 1, 1)), "Conv3d", atol=1e-5)
    assert conv3(volume).shape == (1, 3, 4, 5, 6)


def test_deepcopy_makes_an_independent_module_of_torch_or_distributed_parameters():
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    model(torch.randn(5, 4)).sum().backward()
    twin = copy.deepcopy(model)
    assert isinstance(twin[0].weight, nn.Parameter) and twin[0].weight.requires_grad
    same(twin[0].weight, model[0].weight, "copied values")
    same(twin[0].weight.grad, model[0].weight.grad, "copied gradient")
    same(twin[1].running_mean, model[1].running_mean, "copied buffer")
    with torch.no_grad():
        twin[0].weight.add_(1.0)
    assert not torch.allclose(twin[0].weight, model[0].weight), "the copy shares memory with the original"
    raises(RuntimeError, copy.deepcopy, model[0].weight * 2, contains="graph leaves")
    dtorch.distribute_module(model, MESH)
    dtwin = copy.deepcopy(model)
    assert isinstance(dtwin[0].weight, nn.Parameter) and isinstance(dtwin[0].weight, dtorch.Tensor)
    assert dtwin[0].weight.placements == model[0].weight.placements and dtwin[0].weight.requires_grad
    with torch.no_grad():
        dtwin[0].weight.add_(1.0)
    same(dtwin[0].weight, model[0].weight.full_tensor() + 1.0, "the distributed copy, written")
    same(model[0].weight, twin[0].weight.detach() - 1.0, "the distributed original, untouched")


run(globals())
