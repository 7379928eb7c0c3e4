"""torch.nn on torch tensors: Module's registration, iteration, state_dict and hooks with PyTorch's names, orders and
messages; each layer's output against torch.nn.functional with the same weights; the default initialisations' bounds;
torch.nn.init's statistics and seeding."""

import math
import sys
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init
from _testing import raises, run


def same(got, want, what=""):
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), what


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.ff = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 6))
        self.register_buffer("scale", torch.full((6,), 2.0))
        self.register_buffer("cache", torch.zeros(3), persistent=False)

    def forward(self, x):
        return x + self.ff(self.norm(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(6, 3, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


# ---- registration and iteration ----

def test_assignment_registers_parameters_buffers_and_submodules():
    m = nn.Module()
    m.w = nn.Parameter(torch.ones(2))
    m.child = nn.Linear(2, 2)
    m.register_buffer("b", torch.zeros(2))
    m.plain = 5
    assert list(m._parameters) == ["w"] and list(m._modules) == ["child"] and list(m._buffers) == ["b"]
    assert m.w is m._parameters["w"] and m.child is m._modules["child"] and m.plain == 5
    m.b = torch.ones(2)  # a registered buffer's name takes a new tensor
    assert m.b.tolist() == [1.0, 1.0] and "b" in m._buffers
    m.w = None
    assert m._parameters["w"] is None and m.w is None
    raises(TypeError, setattr, m, "w", torch.ones(2), contains="cannot assign 'torch.FloatTensor' as parameter 'w' "
                                                              "(torch.nn.Parameter or None expected)")
    raises(TypeError, setattr, m, "child", 3, contains="as child module 'child'")
    raises(TypeError, setattr, m, "b", 3, contains="as buffer 'b' (torch.Tensor or None expected)")
    m.child = nn.Parameter(torch.ones(1))  # a Parameter under a submodule's name replaces it
    assert "child" not in m._modules and "child" in m._parameters
    del m.child
    del m.b
    assert "child" not in m._parameters and "b" not in m._buffers
    raises(AttributeError, getattr, m, "child", contains="'Module' object has no attribute 'child'")


def test_register_functions_check_names_and_types_as_pytorch():
    m = nn.Linear(2, 2)
    raises(KeyError, m.register_parameter, "a.b", nn.Parameter(torch.ones(1)), contains="contain")
    raises(KeyError, m.register_parameter, "", nn.Parameter(torch.ones(1)), contains="empty string")
    raises(KeyError, m.register_parameter, "forward", nn.Parameter(torch.ones(1)), contains="attribute 'forward' already exists")
    raises(TypeError, m.register_parameter, "p", torch.ones(1), contains="torch.nn.Parameter or None required")
    raises(TypeError, m.register_parameter, 3, None, contains="parameter name should be a string")
    raises(TypeError, m.register_buffer, "q", [1.0], contains="torch Tensor or None required")
    raises(TypeError, m.add_module, "x", 3, contains="is not a Module subclass")
    raises(KeyError, m.add_module, "a.b", nn.ReLU(), contains="contain")
    m.register_module("act", nn.ReLU())
    assert isinstance(m.act, nn.ReLU)
    raises(AttributeError, nn.Module.register_parameter, object.__new__(nn.Linear), "p", None,
           contains="before Module.__init__() call")


def test_named_modules_and_parameters_follow_registration_order_without_duplicates():
    net = Net()
    assert [n for n, _ in net.named_modules()] == [
        "", "embed", "blocks", "blocks.0", "blocks.0.norm", "blocks.0.ff", "blocks.0.ff.0", "blocks.0.ff.1",
        "blocks.0.ff.2", "blocks.1", "blocks.1.norm", "blocks.1.ff", "blocks.1.ff.0", "blocks.1.ff.1", "blocks.1.ff.2",
        "head"]
    names = [n for n, _ in net.named_parameters()]
    assert names[:7] == ["embed.weight", "blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.0.ff.0.weight",
                         "blocks.0.ff.0.bias", "blocks.0.ff.2.weight", "blocks.0.ff.2.bias"] and names[-1] == "head.weight"
    assert len(list(net.parameters())) == len(names) == 1 + 2 * 6 + 1
    assert [n for n, _ in net.named_parameters(prefix="model", recurse=False)] == []
    assert [n for n, _ in net.blocks[0].named_parameters(prefix="b0", recurse=False)] == []
    assert [n for n, _ in net.head.named_parameters(prefix="h")] == ["h.weight"]
    assert [n for n, _ in net.named_buffers()] == ["blocks.0.scale", "blocks.0.cache", "blocks.1.scale", "blocks.1.cache"]
    assert [n for n, _ in net.named_children()] == ["embed", "blocks", "head"]
    assert list(net.children())[2] is net.head and len(list(net.modules())) == 16
    # a module and a parameter reached twice are listed once (tied weights)
    tied = nn.Sequential(net.head, net.head)
    assert [n for n, _ in tied.named_modules()] == ["", "0"] and [n for n, _ in tied.named_parameters()] == ["0.weight"]
    assert len(list(tied.named_parameters(remove_duplicate=False))) == 2
    shared = nn.Module()
    shared.a = nn.Parameter(torch.ones(2))
    shared.b = shared.a
    assert [n for n, _ in shared.named_parameters()] == ["a"]


def test_get_submodule_and_get_parameter_name_what_is_missing():
    net = Net()
    assert net.get_submodule("blocks.1.ff.0") is net.blocks[1].ff[0] and net.get_submodule("") is net
    assert net.get_parameter("blocks.0.norm.bias") is net.blocks[0].norm.bias
    assert net.get_buffer("blocks.1.scale") is net.blocks[1].scale
    raises(AttributeError, net.get_submodule, "blocks.7", contains="ModuleList has no attribute `7`")
    raises(AttributeError, net.get_submodule, "blocks.0.scale", contains="`scale` is not an nn.Module")
    raises(AttributeError, net.get_parameter, "blocks.0.scale", contains="`scale` is not an nn.Parameter")
    raises(AttributeError, net.get_parameter, "head.bias", contains="`bias` is not an nn.Parameter")


def test_train_eval_apply_requires_grad_and_dir():
    net = Net()
    assert net.training and all(m.training for m in net.modules())
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    raises(ValueError, net.train, "yes", contains="training mode is expected to be boolean")
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[0] == "Embedding" and seen[-1] == "Net" and seen.count("Linear") == 5
    assert all(p.requires_grad for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    names = dir(net.blocks[0])
    assert "norm" in names and "scale" in names and "forward" in names and "training" in names
    assert "0" not in dir(net.blocks)


def test_to_converts_floating_parameters_in_place_and_keeps_integer_buffers():
    m = nn.Linear(3, 2)
    m.register_buffer("steps", torch.tensor([1, 2]))
    weight = m.weight
    before = m.weight.tolist()
    assert m.to(torch.float64) is m and m.weight is weight and m.weight.dtype == torch.float64
    assert isinstance(m.weight, nn.Parameter) and m.bias.dtype == torch.float64 and m.steps.dtype == torch.int64
    assert m.weight.tolist() == [[float(torch.tensor(v).item()) for v in row] for row in before]
    assert m.float().weight.dtype == torch.float32 and m.double().bias.dtype == torch.float64
    assert m.half().weight.dtype == torch.float16 and m.bfloat16().weight.dtype == torch.bfloat16
    assert m.to(device="cpu", dtype=torch.float32).weight.dtype == torch.float32
    assert m.to(torch.zeros(1, dtype=torch.float64)).weight.dtype == torch.float64
    raises(TypeError, m.to, torch.int32, contains="only accepts floating point")


def test_parameter_is_a_tensor_sharing_its_memory():
    t = torch.zeros(3)
    p = nn.Parameter(t)
    assert isinstance(p, torch.Tensor) and isinstance(p, nn.Parameter) and p.requires_grad
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    t.add_(1.0)
    assert p.tolist() == [1.0, 1.0, 1.0]
    assert type(p.data) is torch.Tensor and p.data.tolist() == [1.0, 1.0, 1.0]
    assert (p + 1).tolist() == [2.0] * 3 and (t - p).tolist() == [0.0] * 3 and (t * p).tolist() == [1.0] * 3
    assert type(p * 2) is torch.Tensor and torch.add(p, p).tolist() == [2.0] * 3
    assert repr(p).startswith("Parameter containing:\ntensor([1., 1., 1.]")
    assert nn.Parameter().shape == (0,)
    raises(TypeError, nn.Parameter, [1.0], contains="takes a torch.Tensor or a dtorch.Tensor")
    p.data = torch.ones(2, 2)
    assert p.shape == (2, 2) and isinstance(p, nn.Parameter)


# ---- printing ----

def test_repr_is_pytorchs():
    assert repr(nn.Linear(4, 8)) == "Linear(in_features=4, out_features=8, bias=True)"
    assert repr(nn.Linear(4, 8, bias=False)) == "Linear(in_features=4, out_features=8, bias=False)"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.LayerNorm(8)) == "LayerNorm((8,), eps=1e-05, elementwise_affine=True)"
    assert repr(nn.RMSNorm([2, 3], eps=1e-6)) == "RMSNorm((2, 3), eps=1e-06, elementwise_affine=True)"
    assert repr(nn.GroupNorm(2, 4)) == "GroupNorm(2, 4, eps=1e-05, affine=True)"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"
    assert repr(nn.SiLU()) == "SiLU()" and repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.GELU(approximate="tanh")) == "GELU(approximate='tanh')" and repr(nn.Identity()) == "Identity()"
    assert repr(nn.Conv2d(3, 8, 3, padding=1, bias=False)) == \
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)"
    assert repr(nn.Conv2d(4, 8, (3, 5), stride=2, groups=2, padding_mode="reflect")) == \
        "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), groups=2, padding_mode=reflect)"
    assert repr(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.ModuleList([nn.Linear(3, 3) for _ in range(3)]))) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): ModuleList(\n"
        "    (0-2): 3 x Linear(in_features=3, out_features=3, bias=True)\n"
        "  )\n"
        ")")
    assert repr(nn.ModuleDict({"a": nn.ReLU()})) == "ModuleDict(\n  (a): ReLU()\n)"


# ---- layers against torch.nn.functional ----

def test_linear_embedding_and_activations_match_the_functional_api():
    torch.manual_seed(1)
    x = torch.randn(4, 5, 6)
    lin = nn.Linear(6, 7)
    assert lin.weight.shape == (7, 6) and lin.bias.shape == (7,)
    same(lin(x), F.linear(x, lin.weight, lin.bias), "Linear")
    same(lin(x), x @ lin.weight.T + lin.bias, "Linear by hand")
    no_bias = nn.Linear(6, 3, bias=False)
    assert no_bias.bias is None and [n for n, _ in no_bias.named_parameters()] == ["weight"]
    same(no_bias(x), torch.matmul(x, no_bias.weight.t()), "Linear without bias")
    ids = torch.tensor([[0, 3, 9], [2, 2, 0]])
    emb = nn.Embedding(10, 4, padding_idx=2)
    assert emb.weight.shape == (10, 4) and emb.weight[2].tolist() == [0.0] * 4
    same(emb(ids), F.embedding(ids, emb.weight, padding_idx=2), "Embedding")
    same(emb(ids)[0, 1], emb.weight[3], "Embedding row")
    assert nn.Embedding(5, 2, padding_idx=-1).padding_idx == 4
    raises(ValueError, nn.Embedding, 5, 2, padding_idx=5, contains="Padding_idx must be within num_embeddings")
    pretrained = nn.Embedding.from_pretrained(torch.eye(3))
    assert not pretrained.weight.requires_grad and pretrained(torch.tensor([1])).tolist() == [[0.0, 1.0, 0.0]]
    same(nn.ReLU()(x), F.relu(x), "ReLU")
    same(nn.ReLU()(x), torch.clamp(x, min=0), "ReLU by hand")
    same(nn.SiLU()(x), x * torch.sigmoid(x), "SiLU")
    same(nn.GELU()(x), F.gelu(x), "GELU")
    same(nn.GELU()(x), 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0))), "GELU by hand")
    same(nn.GELU("tanh")(x), F.gelu(x, approximate="tanh"), "GELU tanh")
    raises(ValueError, nn.GELU, "sigmoid", contains="approximate argument must be either none or tanh")
    assert nn.Identity(3, unused=True)(x) is x


def test_norms_match_the_functional_api():
    torch.manual_seed(2)
    x = torch.randn(2, 4, 3, 5)
    ln = nn.LayerNorm([3, 5], eps=1e-3)
    assert ln.normalized_shape == (3, 5) and ln.weight.tolist() == [[1.0] * 5] * 3 and ln.bias.tolist() == [[0.0] * 5] * 3
    with torch.no_grad():  # parameters require grad: writing into them in place records nothing only here
        ln.weight.normal_()
        ln.bias.normal_()
    same(ln(x), F.layer_norm(x, (3, 5), ln.weight, ln.bias, 1e-3), "LayerNorm")
    flat = x.reshape(2, 4, 15)
    mean = flat.mean(-1, keepdim=True)
    var = ((flat - mean) ** 2).mean(-1, keepdim=True)
    by_hand = ((flat - mean) / torch.sqrt(var + 1e-3)).reshape(2, 4, 3, 5) * ln.weight + ln.bias
    assert torch.allclose(ln(x), by_hand, atol=1e-5), "LayerNorm by hand"
    plain = nn.LayerNorm(5, elementwise_affine=False)
    assert plain.weight is None and plain.bias is None and list(plain.parameters()) == []
    same(plain(x), F.layer_norm(x, [5]), "LayerNorm without affine")
    assert nn.LayerNorm(5, bias=False).bias is None
    rms = nn.RMSNorm(5)
    assert rms.eps is None and rms.weight.tolist() == [1.0] * 5
    with torch.no_grad():
        rms.weight.uniform_(0.5, 1.5)
    same(rms(x), F.rms_norm(x, (5,), rms.weight), "RMSNorm")
    float32_eps = 1.1920928955078125e-07  # eps=None: the dtype's machine epsilon
    by_hand = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + float32_eps) * rms.weight
    assert torch.allclose(rms(x), by_hand, atol=1e-5), "RMSNorm by hand"
    same(nn.RMSNorm([3, 5], eps=1e-4)(x), F.rms_norm(x, [3, 5], torch.ones(3, 5), 1e-4), "RMSNorm 2-D")
    gn = nn.GroupNorm(2, 4)
    assert gn.weight.shape == (4,) and gn.bias.tolist() == [0.0] * 4
    with torch.no_grad():
        gn.weight.normal_()
    same(gn(x), F.group_norm(x, 2, gn.weight, gn.bias, 1e-5), "GroupNorm")
    raises(ValueError, nn.GroupNorm, 3, 4, contains="num_channels must be divisible by num_groups")


def test_conv2d_matches_the_functional_api():
    torch.manual_seed(3)
    x = torch.randn(2, 4, 9, 8)
    conv = nn.Conv2d(4, 6, 3, stride=2, padding=1)
    assert conv.weight.shape == (6, 4, 3, 3) and conv.bias.shape == (6,)
    same(conv(x), F.conv2d(x, conv.weight, conv.bias, 2, 1), "Conv2d")
    grouped = nn.Conv2d(4, 6, (3, 1), groups=2, bias=False, dilation=(2, 1))
    assert grouped.weight.shape == (6, 2, 3, 1) and grouped.bias is None
    same(grouped(x), F.conv2d(x, grouped.weight, None, 1, 0, (2, 1), 2), "Conv2d grouped")
    same_pad = nn.Conv2d(4, 2, (3, 4), padding="same")
    out = same_pad(x)
    assert out.shape == (2, 2, 9, 8)
    same(out, F.conv2d(x, same_pad.weight, same_pad.bias, 1, "same"), "Conv2d same")
    for mode in ("reflect", "replicate", "circular"):
        padded = nn.Conv2d(4, 3, 3, padding=(1, 2), padding_mode=mode)
        want = F.conv2d(F.pad(x, [2, 2, 1, 1], mode=mode), padded.weight, padded.bias)
        same(padded(x), want, "Conv2d " + mode)
    raises(ValueError, nn.Conv2d, 3, 4, 3, groups=2, contains="in_channels must be divisible by groups")
    raises(ValueError, nn.Conv2d, 4, 4, 3, padding="same", stride=2, contains="not supported for strided")


def test_dropout_is_the_identity_in_evaluation_and_scales_kept_values_in_training():
    torch.manual_seed(4)
    x = torch.rand(200, 100) + 1.0
    drop = nn.Dropout(0.3)
    out = drop(x)
    zeros = (out == 0).sum().item()
    assert 0.25 < zeros / x.numel() < 0.35, zeros
    kept = out != 0
    assert torch.allclose(out[kept], x[kept] / 0.7), "kept values are scaled by 1 / (1 - p)"
    assert drop.eval()(x) is x or torch.equal(drop(x), x)
    assert torch.equal(nn.Dropout(0.0)(x), x)
    assert (nn.Dropout(1.0)(x) == 0).all().item()
    raises(ValueError, nn.Dropout, 1.5, contains="dropout probability has to be between 0 and 1")


def test_containers_index_iterate_and_run_in_order():
    torch.manual_seed(5)
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(5, 3)
    same(seq(x), seq[2](seq[1](seq[0](x))), "Sequential")
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and len(seq[:2]) == 2 and list(seq)[1] is seq[1]
    named = nn.Sequential(OrderedDict([("first", nn.Linear(3, 3)), ("act", nn.SiLU())]))
    assert [n for n, _ in named.named_children()] == ["first", "act"] and named.first is named[0]
    seq.append(nn.Identity())
    assert len(seq) == 4 and [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Linear", "Linear", "Identity"] and list(seq._modules) == ["0", "1", "2"]
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    layers.append(nn.ReLU())
    layers.extend([nn.SiLU()])
    layers.insert(0, nn.Identity())
    assert [type(m).__name__ for m in layers] == ["Identity", "Linear", "Linear", "Linear", "ReLU", "SiLU"]
    assert layers[-1] is layers[5] and len(layers[1:4]) == 3
    raises(IndexError, layers.__getitem__, 6)
    assert len(list(layers.parameters())) == 6
    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.ReLU()})
    heads["c"] = nn.Identity()
    assert list(heads.keys()) == ["a", "b", "c"] and "b" in heads and len(heads) == 3
    assert heads.pop("b") is not None and list(heads) == ["a", "c"]
    assert [n for n, _ in heads.named_parameters()] == ["a.weight", "a.bias"]


# ---- state_dict ----

def test_state_dict_is_ordered_like_pytorch_and_shares_memory():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    # a module's own parameters and buffers come before its children's
    assert list(sd)[:9] == ["embed.weight", "blocks.0.scale", "blocks.0.norm.weight", "blocks.0.norm.bias",
                            "blocks.0.ff.0.weight", "blocks.0.ff.0.bias", "blocks.0.ff.2.weight", "blocks.0.ff.2.bias",
                            "blocks.1.scale"]
    assert "blocks.0.cache" not in sd and list(sd)[-1] == "head.weight"  # non-persistent buffers stay out
    assert type(sd["head.weight"]) is torch.Tensor
    assert isinstance(net.state_dict(keep_vars=True)["head.weight"], nn.Parameter)
    assert list(net.head.state_dict(prefix="model.head.")) == ["model.head.weight"]
    sd["head.weight"].zero_()
    assert net.head.weight.abs().sum().item() == 0.0, "state_dict values share the module's memory"


def test_load_state_dict_round_trips_and_reports_mismatches():
    torch.manual_seed(6)
    ids = torch.tensor([[1, 4, 7]])
    source, target = Net(), Net()
    result = target.load_state_dict(source.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == [] and repr(result) == "<All keys matched successfully>"
    same(target(ids), source(ids), "loaded")
    with torch.no_grad():
        source.head.weight.add_(1.0)
    assert not torch.allclose(target(ids), source(ids)), "load_state_dict copies, it does not alias"

    partial = source.state_dict()
    del partial["head.weight"]
    partial["extra.weight"] = torch.ones(1)
    partial["blocks.0.bogus"] = torch.ones(1)
    e = raises(RuntimeError, target.load_state_dict, partial)
    assert str(e) == ('Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "head.weight". \n\t'
                      'Unexpected key(s) in state_dict: "extra.weight", "blocks.0.bogus". '), str(e)
    report = target.load_state_dict(partial, strict=False)
    assert report.missing_keys == ["head.weight"] and report.unexpected_keys == ["extra.weight", "blocks.0.bogus"]
    assert report == (["head.weight"], ["extra.weight", "blocks.0.bogus"])

    wrong = source.state_dict()
    wrong["head.weight"] = torch.zeros(4, 6)
    e = raises(RuntimeError, target.load_state_dict, wrong, strict=False)
    assert str(e) == ("Error(s) in loading state_dict for Net:\n\tsize mismatch for head.weight: copying a param with "
                      "shape torch.Size([4, 6]) from checkpoint, the shape in current model is torch.Size([3, 6])."), str(e)
    raises(TypeError, target.load_state_dict, [1, 2], contains="Expected state_dict to be dict-like")

    lin = nn.Linear(2, 2)
    new = {"weight": torch.ones(2, 2), "bias": torch.zeros(2)}
    lin.load_state_dict(new, assign=True)
    assert isinstance(lin.weight, nn.Parameter) and lin.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    new["weight"].zero_()
    assert lin.weight.sum().item() == 0.0, "assign=True puts the given tensor in place"


# ---- hooks ----

def test_forward_hooks_change_inputs_and_outputs_and_are_removable():
    lin = nn.Linear(2, 2)
    x = torch.ones(1, 2)
    calls = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    post = lin.register_forward_hook(lambda m, args, out: calls.append((m, args[0].tolist())) or out + 100)
    same(lin(x), F.linear(x * 2, lin.weight, lin.bias) + 100, "hooked")
    assert calls == [(lin, [[2.0, 2.0]])]
    pre.remove()
    pre.remove()  # idempotent
    same(lin(x), F.linear(x, lin.weight, lin.bias) + 100, "pre-hook removed")
    with post:
        pass
    same(lin(x), F.linear(x, lin.weight, lin.bias), "both removed")

    order = []
    lin.register_forward_pre_hook(lambda m, a: order.append("first"))
    lin.register_forward_pre_hook(lambda m, a: order.append("prepended"), prepend=True)
    lin.register_forward_pre_hook(lambda m, a, k: (a, dict(k, unused=None)) if False else None, with_kwargs=True)
    lin(x)
    assert order == ["prepended", "first"]

    class Scaled(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    s = Scaled()
    s.register_forward_pre_hook(lambda m, args, kwargs: (args, {"scale": 3.0}), with_kwargs=True)
    s.register_forward_hook(lambda m, args, kwargs, out: out + kwargs["scale"], with_kwargs=True)
    assert s(torch.ones(1)).tolist() == [6.0]
    s.register_forward_pre_hook(lambda m, args, kwargs: "bad", with_kwargs=True)
    raises(RuntimeError, s, torch.ones(1), contains="forward pre-hook must return None or a tuple of (new_args, new_kwargs)")


def test_always_called_forward_hooks_run_when_forward_fails():
    class Failing(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    seen = []
    f = Failing()
    f.register_forward_hook(lambda m, args, out: seen.append("plain"))
    f.register_forward_hook(lambda m, args, out: seen.append(("always", out)), always_call=True)
    raises(ValueError, f, 1, contains="boom")
    assert seen == [("always", None)]
    raises(NotImplementedError, nn.Module(), 1, contains='Module [Module] is missing the required "forward" function')


# ---- initialisation ----

def test_default_initialisations_use_pytorchs_bounds():
    torch.manual_seed(7)
    lin = nn.Linear(50, 300)
    bound = 1 / math.sqrt(50)
    for p in (lin.weight, lin.bias):
        assert p.abs().max().item() <= bound and p.abs().max().item() > 0.9 * bound
    conv = nn.Conv2d(6, 200, (3, 2), groups=2)
    bound = 1 / math.sqrt(3 * 3 * 2)
    assert conv.weight.abs().max().item() <= bound and conv.weight.abs().max().item() > 0.9 * bound
    assert conv.bias.abs().max().item() <= bound
    emb = nn.Embedding(1000, 40)
    assert abs(emb.weight.mean().item()) < 0.02 and abs(emb.weight.std().item() - 1.0) < 0.02
    lin64 = nn.Linear(3, 2, dtype=torch.float64)
    assert lin64.weight.dtype == torch.float64 and lin64.bias.dtype == torch.float64


def test_init_functions_have_their_bounds_and_statistics():
    torch.manual_seed(8)
    t = torch.empty(400, 300)
    init.uniform_(t, -0.5, 2.0)
    assert t.min().item() >= -0.5 and t.max().item() < 2.0 and abs(t.mean().item() - 0.75) < 0.01
    init.normal_(t, 3.0, 0.5)
    assert abs(t.mean().item() - 3.0) < 0.01 and abs(t.std().item() - 0.5) < 0.01
    init.trunc_normal_(t, mean=0.0, std=1.0, a=-1.0, b=1.5)
    assert t.min().item() >= -1.0 and t.max().item() <= 1.5 and t.min().item() < -0.99 and t.max().item() > 1.49
    # the standard normal restricted to [-1, 1.5] has mean (phi(-1) - phi(1.5)) / (Phi(1.5) - Phi(-1))
    phi = lambda v: math.exp(-v * v / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda v: (1 + math.erf(v / math.sqrt(2))) / 2  # noqa: E731
    assert abs(t.mean().item() - (phi(-1.0) - phi(1.5)) / (cdf(1.5) - cdf(-1.0))) < 0.01
    assert init.constant_(t, 0.25) is t and (t == 0.25).all().item()
    assert (init.ones_(t) == 1).all().item() and (init.zeros_(t) == 0).all().item()
    assert init.eye_(torch.empty(2, 3)).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    fan_in, fan_out = 300, 400
    bound = math.sqrt(6.0 / (fan_in + fan_out)) * 2.0
    init.xavier_uniform_(t, gain=2.0)
    assert t.abs().max().item() <= bound and t.abs().max().item() > 0.99 * bound
    init.xavier_normal_(t)
    assert abs(t.std().item() - math.sqrt(2.0 / (fan_in + fan_out))) < 0.001
    init.kaiming_uniform_(t, nonlinearity="relu")
    bound = math.sqrt(2.0) * math.sqrt(3.0 / fan_in)
    assert t.abs().max().item() <= bound and t.abs().max().item() > 0.99 * bound
    init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    assert abs(t.std().item() - math.sqrt(2.0 / fan_out)) < 0.001
    conv_weight = torch.empty(8, 4, 3, 3)
    init.kaiming_uniform_(conv_weight, a=math.sqrt(5))
    assert conv_weight.abs().max().item() <= 1 / math.sqrt(4 * 9)
    raises(ValueError, init.xavier_uniform_, torch.empty(5), contains="fewer than 2 dimensions")
    raises(ValueError, init.kaiming_normal_, t, mode="fan", contains="Mode fan not supported")
    raises(NotImplementedError, init.uniform_, t, generator=object(), contains="generator=")


def test_calculate_gain_is_pytorchs():
    assert init.calculate_gain("linear") == 1.0 and init.calculate_gain("conv2d") == 1.0
    assert init.calculate_gain("sigmoid") == 1.0 and init.calculate_gain("tanh") == 5.0 / 3
    assert init.calculate_gain("relu") == math.sqrt(2.0) and init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2.0 / 1.04)
    raises(ValueError, init.calculate_gain, "softmax", contains="Unsupported nonlinearity softmax")


def test_manual_seed_makes_initialisation_reproducible():
    def weights(seed):
        torch.manual_seed(seed)
        net = Net()
        init.trunc_normal_(net.head.weight, std=0.02)
        return [p.tolist() for p in net.parameters()]

    first = weights(42)
    assert weights(42) == first
    assert weights(43) != first


def test_torch_nn_does_not_import_dtorch():
    Net()(torch.tensor([[1, 2]]))
    assert "dtorch" not in sys.modules


run(globals())
