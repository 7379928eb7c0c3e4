"""Autograd of distributed tensors through the layers of convolutional and other non-transformer models: conv1d, conv2d,
conv_transpose2d, adaptive and 1-D pooling, relu6, group_norm, batch_norm (batch statistics, and running statistics
in evaluation), max and average pooling, addmm, activations (elu, leaky_relu, softplus, hardtanh), the reductions to
the largest or smallest values (max, min, amax, amin), einsum, index_select, cumsum, prod, clamp, abs, maximum, and
dropout in training. Gradients are compared with the shim's one-device autograd on the same values (full_tensor(),
rtol 1e-4, atol 1e-5) and carry their leaf's placements."""

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard
from _testing import close_tensor as close, run

LINE = dtorch.init_device_mesh("cpu", (4,))
GRID = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))


def leaves(mesh, specs):
    """For each (shape, placements): a torch leaf and its distributed twin, both requiring grad."""
    out = []
    for shape, placements in specs:
        x = torch.randn(*shape)
        out.append((x.requires_grad_(), dtorch.distribute_tensor(x.detach(), mesh, placements).requires_grad_()))
    return out


def compare(program, mesh, specs, what):
    pairs = leaves(mesh, specs)
    want = program(*[t for t, _ in pairs])
    want.backward()
    got = program(*[d for _, d in pairs])
    close(got, want.detach(), what + ": value")
    got.backward()
    for i, (t, d) in enumerate(pairs):
        assert d.grad is not None, "%s: input %d got no gradient" % (what, i)
        assert tuple(d.grad.placements) == tuple(d.placements), (what, i, d.grad.placements, d.placements)
        close(d.grad, t.grad, "%s: gradient of input %d" % (what, i))


def cnn(x, w1, b1, gw, gb, w2, fc, fb):
    h = F.conv2d(x, w1, b1, padding=1)
    h = F.group_norm(h, 2, gw, gb)
    h = F.max_pool2d(F.elu(h), 2)
    h = F.avg_pool2d(F.conv2d(h, w2, stride=1, padding=1), 2)
    h = torch.addmm(fb, h.reshape(4, 12), fc)
    h = F.leaky_relu(h, 0.1) + F.softplus(h) + F.hardtanh(h, -0.5, 0.5)
    return h.amax(dim=1).sum() + h.min()


def test_a_small_cnn_matches_one_device_autograd():
    torch.manual_seed(0)
    params = [((6, 3, 3, 3), None), ((6,), None), ((6,), None), ((6,), None), ((3, 6, 3, 3), None), ((12, 5), None), ((5,), None)]
    for mesh, batch in ((LINE, [Shard(0)]), (GRID, [Shard(0), Shard(2)])):
        replicated = [Replicate()] * mesh.ndim
        specs = [((4, 3, 8, 8), batch)] + [(shape, replicated) for shape, _ in params]
        compare(cnn, mesh, specs, "cnn on %s" % (mesh,))


def decoder(x, w, b, w1):
    h = F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)
    h = F.adaptive_avg_pool2d(F.relu6(h * 3.0), (3, 5))
    s = F.adaptive_max_pool1d(F.avg_pool1d(h.flatten(2), 2), 4)
    return (s * s).sum() + F.conv1d(h.flatten(2), w1).sum()


def test_a_small_decoder_matches_one_device_autograd():
    torch.manual_seed(3)
    for mesh, batch in ((LINE, [Shard(0)]), (GRID, [Shard(0), Shard(1)])):
        replicated = [Replicate()] * mesh.ndim
        specs = [((5, 4, 3, 3), batch), ((4, 2, 3, 3), replicated), ((2,), replicated), ((3, 2, 2), replicated)]
        compare(decoder, mesh, specs, "decoder on %s" % (mesh,))


def test_batch_norm_matches_one_device_autograd():
    torch.manual_seed(2)
    mean, var = torch.randn(4), torch.rand(4) + 0.5
    whole = [Replicate(), Replicate()]

    def batch_statistics(x, w, b):
        return F.batch_norm(x, None, None, w, b, training=True).square().sum()

    def running_statistics(x, w, b):
        if isinstance(x, dtorch.Tensor):
            m, v = dtorch.distribute_tensor(mean, GRID, whole), dtorch.distribute_tensor(var, GRID, whole)
        else:
            m, v = mean, var
        return (F.batch_norm(x, m, v, w, b, training=False) * x).sum()

    for program in (batch_statistics, running_statistics):
        compare(program, GRID, [((6, 4, 3, 3), [Shard(1), Shard(0)]), ((4,), whole), ((4,), whole)], program.__name__)


def test_selections_einsum_and_element_wise_operators_match_one_device_autograd():
    torch.manual_seed(1)
    index = torch.tensor([4, 0, 4, 2])

    def program(x, y, z):
        ix = dtorch.distribute_tensor(index, LINE, [Replicate()]) if isinstance(x, dtorch.Tensor) else index
        values, _ = torch.max(x, dim=1)
        low, _ = x.min(0, keepdim=True)
        e = torch.einsum("ij,jk->ik", [x, y])
        s = x.index_select(1, ix).cumsum(1)
        m = torch.maximum(x.clamp(-0.5, 0.5), x.abs() * 0.25)
        return (values.sum() + low.sum() + e.square().sum() + (s * s).sum() * 0.1 + m.sum() + x.amin() + torch.erf(z).sum()
                + x.prod(0).sum())

    compare(program, LINE, [((6, 5), [Shard(1)]), ((5, 3), [Shard(0)]), ((7,), [Shard(0)])], "selections")


SECOND_ORDER = {
    "abs": (lambda x: x.abs() * x, (6, 5)),
    "log1p, expm1, erf": (lambda x: (x * x).log1p() + x.expm1() + x.erf(), (6, 5)),
    "clamp, maximum": (lambda x: x.clamp(-0.5, 0.5) * x + torch.maximum(x, x * 0.5) * x, (6, 5)),
    "softplus, elu": (lambda x: F.softplus(x, 2.0, 1.0) + F.elu(x, 0.7), (6, 5)),
    "leaky_relu, hardtanh": (lambda x: F.leaky_relu(x, 0.1) * x + F.hardtanh(x) * x, (6, 5)),
    "einsum, addmm, cumsum": (lambda x: torch.einsum("ij,kj->ik", [x, x]).sum(1) + torch.addmm(x[:, :3], x, x.t()[:, :3]).sum(1)
                              + (x * x).cumsum(1).sum(1), (6, 5)),
    "group_norm, batch_norm": (lambda x: F.group_norm(x.reshape(2, 3, 5), 3).square().sum() + F.batch_norm(x, None, None, training=True)
                               .square().sum(), (6, 5)),
    "max_pool2d, avg_pool2d": (lambda x: F.max_pool2d(x * x, 2) + F.avg_pool2d(x * x, 2), (2, 3, 4, 4)),
    "adaptive pooling": (lambda x: F.adaptive_max_pool2d(x * x, 2) + F.adaptive_avg_pool2d(x * x, 2), (2, 3, 5, 4)),
    "max(dim), amax, index_select": (lambda x: x.max(1)[0].square().sum() + x.amax(0).square().sum()
                                     + x.index_select(0, index_of(x, [1, 1, 4])).square().sum(), (6, 5)),
    "conv_transpose1d": (lambda x: F.conv_transpose1d(x.reshape(2, 3, 5), x.reshape(3, 2, 5)[:, :, :2], stride=2).square(), (6, 5)),
    # a pass computes RMS norm's gradients with fused kernels, a pass that records its graph with the formula
    "rms_norm": (lambda x: F.rms_norm(x, [5], x[0] + 2.0).square(), (6, 5)),
}


def index_of(like, values):
    """An index tensor of `values` beside `like`: on its mesh, replicated, for a distributed tensor."""
    if isinstance(like, dtorch.Tensor):
        return dtorch.tensor(values, device_mesh=like.device_mesh)
    return torch.tensor(values)


def test_second_derivatives_match_one_device_autograd():
    torch.manual_seed(4)
    for name, (f, shape) in SECOND_ORDER.items():
        x = torch.randn(*shape, requires_grad=True)
        (g,) = torch.autograd.grad(f(x).sum(), [x], create_graph=True)
        (want,) = torch.autograd.grad((g * g).sum(), [x])
        d = dtorch.distribute_tensor(x.detach(), LINE, [Shard(0)]).requires_grad_()
        (dg,) = torch.autograd.grad(f(d).sum(), [d], create_graph=True)
        (got,) = torch.autograd.grad((dg * dg).sum(), [d])
        close(got, want, "second derivative through " + name)


def test_second_derivative_of_attention_matches_its_formula():
    # libtorch's CPU attention kernels have no second derivative, so one device differentiates the formula twice; the
    # distributed pass that records its graph uses the formula too (the fused gradient operator has no derivative).
    def formula(q, k, v):
        scores = q.matmul(k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
        allowed = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        return scores.masked_fill(allowed.logical_not(), float("-inf")).softmax(-1).matmul(v)

    torch.manual_seed(6)
    x = torch.randn(4, 6, 5, requires_grad=True)
    q = x.reshape(2, 2, 6, 5)
    (g,) = torch.autograd.grad(formula(q, q * 0.5, q).square().sum(), [x], create_graph=True)
    (want,) = torch.autograd.grad((g * g).sum(), [x])
    d = dtorch.distribute_tensor(x.detach(), LINE, [Shard(0)]).requires_grad_()
    dq = d.reshape(2, 2, 6, 5)
    out = F.scaled_dot_product_attention(dq, dq * 0.5, dq, is_causal=True)
    (dg,) = torch.autograd.grad(out.square().sum(), [d], create_graph=True)
    (got,) = torch.autograd.grad((dg * dg).sum(), [d])
    close(got, want, "second derivative through attention")


def test_dropout_in_training_passes_its_gradient_through_the_mask():
    x = torch.randn(16, 8)
    d = dtorch.distribute_tensor(x, LINE, [Shard(0)]).requires_grad_()
    dtorch.manual_seed(5)
    y = F.dropout(d, 0.25)
    (y * 3.0).sum().backward()
    kept = (y.full_tensor() != 0).float()
    close(d.grad, kept * 3.0 / 0.75, "dropout's gradient")
    assert 0 < kept.sum().item() < 128, "some elements dropped, some kept"
    again = dtorch.distribute_tensor(x, GRID, [Shard(1), Shard(0)]).requires_grad_()
    dtorch.manual_seed(5)
    (F.dropout(again, 0.25) * 3.0).sum().backward()
    close(again.grad, d.grad.full_tensor(), "the same seed gives the same mask on another mesh")


run(globals())
