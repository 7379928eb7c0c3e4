"""Autograd of distributed tensors (the runtime's tape): requires_grad from factories, requires_grad_(),
distribute_tensor and nn.Parameter; backward() with and without a gradient; .grad accumulating and cleared;
torch.autograd.grad; no_grad and inference_mode stop recording; detach(). Gradients are compared with the shim's
one-device autograd on the same values (full_tensor(), rtol 1e-4, atol 1e-5): functional operators of the Llama and
DiT blocks, a tensor-parallel MLP (ColwiseParallel / RowwiseParallel), and a replicated module fed a batch sharded on
the data-parallel dimension."""

import dtorch
import torch
import torch.nn as nn
import torch.nn.functional as F
from dtorch import Partial, Replicate, Shard, _tensor
from dtorch.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from _testing import close_tensor as close, raises, run

LINE = dtorch.init_device_mesh("cpu", (4,))
GRID = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))


def test_requires_grad_comes_from_factories_requires_grad_distribute_tensor_and_parameter():
    assert dtorch.zeros(4, 3, device_mesh=LINE, requires_grad=True).requires_grad
    assert dtorch.randn(4, 3, device_mesh=LINE, placements=[Shard(0)], requires_grad=True).requires_grad
    assert dtorch.full((2,), 1.5, device_mesh=LINE, requires_grad=True).requires_grad
    assert dtorch.tensor([1.0, 2.0], device_mesh=LINE, requires_grad=True).requires_grad
    t = dtorch.ones(5, device_mesh=LINE)
    assert not t.requires_grad and t.is_leaf and t.grad_fn is None and t.grad is None
    assert t.requires_grad_() is t and t.requires_grad
    raises(ValueError, dtorch.arange(3, device_mesh=LINE).requires_grad_, contains="floating point")
    d = dtorch.distribute_tensor(torch.ones(4, requires_grad=True), LINE, [Shard(0)])
    assert d.requires_grad and d.is_leaf
    assert not dtorch.distribute_tensor(torch.ones(4), LINE, [Shard(0)]).requires_grad
    p = nn.Parameter(dtorch.randn(4, 4, device_mesh=LINE, placements=[Shard(0)]))
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
    frozen = nn.Parameter(dtorch.randn(4, device_mesh=LINE), requires_grad=False)
    assert not frozen.requires_grad
    y = (p * 2).sum()
    assert y.requires_grad and not y.is_leaf and y.grad_fn.name() == "sum"


def test_backward_accumulates_into_grad_with_the_leaf_placements():
    x = torch.randn(6, 5)
    for placements, mesh in (([Shard(0)], LINE), ([Replicate()], LINE), ([Shard(1), Shard(0)], GRID), ([Replicate(), Shard(1)], GRID)):
        d = dtorch.distribute_tensor(x, mesh, placements).requires_grad_()
        (d * d).sum().backward()
        assert tuple(d.grad.placements) == tuple(placements), (placements, d.grad.placements)
        close(d.grad, 2 * x, "d(x^2)/dx on %s" % placements)
        (d * 3.0).sum().backward()
        close(d.grad, 2 * x + 3, "accumulated")
        d.grad = None
        assert d.grad is None
        (d.sum() * 2.0).backward()
        close(d.grad, torch.full((6, 5), 2.0), "after clearing")
    partial = dtorch.distribute_tensor(x, LINE, [Replicate()]).redistribute(LINE, [Partial()]).detach().requires_grad_()
    (partial * 1.0).sum().backward()
    assert tuple(partial.grad.placements) == (Replicate(),), "a partial leaf's gradient holds whole values"


def test_backward_takes_a_gradient_and_frees_the_graph():
    x = torch.randn(4, 3)
    g = torch.randn(4, 3)
    d = dtorch.distribute_tensor(x, LINE, [Shard(0)]).requires_grad_()
    y = d.tanh()
    y.backward(dtorch.distribute_tensor(g, LINE, [Replicate()]))
    close(d.grad, g * (1 - torch.tanh(x) ** 2), "tanh with a gradient")
    raises(RuntimeError, y.backward, dtorch.distribute_tensor(g, LINE, [Replicate()]), contains="second time")
    z = d.exp()
    raises(ValueError, z.backward, contains="scalar")
    w = d.sum()
    w.backward(retain_graph=True)
    w.backward()


def test_autograd_grad_returns_gradients_without_accumulating():
    x = torch.randn(5, 4)
    d = dtorch.distribute_tensor(x, LINE, [Shard(1)]).requires_grad_()
    other = dtorch.randn(5, 4, device_mesh=LINE, requires_grad=True)
    loss = (d.relu() * 2.0).sum()
    (gd, go) = torch.autograd.grad(loss, [d, other], allow_unused=True)
    close(gd, (x > 0).float() * 2, "grad of relu")
    assert go is None and d.grad is None
    (gd, go) = torch.autograd.grad((d * 1.0).sum(), [d, other], materialize_grads=True)
    close(go, torch.zeros(5, 4), "materialized")
    raises(ValueError, torch.autograd.grad, (d * 1.0).sum(), [other], contains="not have been used")


def test_no_grad_and_inference_mode_stop_recording_and_detach_drops_history():
    d = dtorch.randn(4, 4, device_mesh=LINE, requires_grad=True)
    with torch.no_grad():
        assert not (d * 2).requires_grad
        d.mul_(1.0)  # in place under no_grad: allowed, as the optimizers do
    with torch.inference_mode():
        assert not (d * 2).requires_grad
    assert (d * 2).requires_grad
    raises(RuntimeError, lambda: d.add_(1.0), contains="no_grad")
    e = (d * 2).detach()
    assert not e.requires_grad and e.is_leaf
    raises(RuntimeError, lambda: d.cumprod(0).sum().backward(), contains="cumprod")


def _pair(shape, mesh, placements, positive=False):
    x = torch.rand(*shape) + 0.5 if positive else torch.randn(*shape)
    return x.requires_grad_(), dtorch.distribute_tensor(x.detach(), mesh, placements).requires_grad_()


def test_functional_operators_match_one_device_autograd():
    x, dx = _pair((2, 6, 8), LINE, [Shard(1)])
    w, dw = _pair((12, 8), LINE, [Shard(0)])
    b, db = _pair((12,), LINE, [Shard(0)])
    n, dn = _pair((8,), LINE, [Replicate()])
    def program(t, x, w, b, n):
        h = F.rms_norm(x, (8,), n, 1e-5)
        h = F.silu(F.linear(h, w, b)) * 0.5
        h = F.layer_norm(h, (12,))
        h = F.gelu(h, approximate="tanh")
        h = h.reshape(2, 6, 3, 4).transpose(1, 2)
        a = F.scaled_dot_product_attention(h, h, h, is_causal=True)
        logits = a.transpose(1, 2).reshape(12, 12)
        target = t.tensor([1, 0, 3, 2, 11, 5, 7, 6, 9, 8, 10, 4])
        return F.cross_entropy(logits, target) + F.softmax(logits, dim=-1).pow(2.0).mean()
    want = program(torch, x, w, b, n)
    want.backward()

    class Local:
        @staticmethod
        def tensor(values):
            return dtorch.tensor(values, device_mesh=LINE)
    got = program(Local, dx, dw, db, dn)
    close(got, want.detach(), "loss")
    got.backward()
    for name, t, d in (("x", x, dx), ("w", w, dw), ("b", b, db), ("norm weight", n, dn)):
        close(d.grad, t.grad, "grad of " + name)
        assert tuple(d.grad.placements) == tuple(d.placements), name


def test_embedding_cat_split_and_views_match_one_device_autograd():
    e, de = _pair((10, 6), LINE, [Shard(1)])
    idx = torch.tensor([[1, 2, 3], [3, 9, 0]])
    h = F.embedding(idx, e)
    dh = F.embedding(dtorch.distribute_tensor(idx, LINE, [Replicate()]), de)
    parts = h.split(2, dim=-1)
    dparts = dh.split(2, dim=-1)
    want = (torch.cat([parts[2], parts[0]], dim=-1)[:, 1:, :].permute(2, 0, 1) * torch.arange(16.0).reshape(4, 2, 2)).sum()
    got = (dtorch.cat([dparts[2], dparts[0]], dim=-1)[:, 1:, :].permute(2, 0, 1)
           * dtorch.distribute_tensor(torch.arange(16.0).reshape(4, 2, 2), LINE, [Replicate()])).sum()
    close(got, want.detach(), "value")
    want.backward()
    got.backward()
    close(de.grad, e.grad, "embedding weight")


class MLP(nn.Module):
    def __init__(self, dim=8, hidden=14):
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(F.silu(self.up(self.norm(x))))


def _copy(model):
    twin = MLP()
    twin.load_state_dict(model.state_dict())
    return twin


def _reference(model, x):
    loss = model(x).pow(2.0).mean()
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


def test_tensor_parallel_mlp_fills_every_parameter_grad():
    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(3, 5, 8)
    want_loss, want = _reference(_copy(model), x)
    for mesh in (LINE, GRID):
        tp = _copy(model)
        parallelize_module(tp, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
        tp.norm.weight = nn.Parameter(dtorch.distribute_tensor(tp.norm.weight.detach(), mesh, [Replicate()] * mesh.ndim))
        dx = dtorch.distribute_tensor(x, mesh, [Replicate()] * mesh.ndim)
        loss = tp(dx).pow(2.0).mean()
        close(loss, want_loss, "loss")
        loss.backward()
        for name, p in tp.named_parameters():
            assert p.grad is not None, name
            assert tuple(p.grad.placements) == tuple(p.placements), (name, p.grad.placements, p.placements)
            close(p.grad, want[name], "tensor-parallel grad of %s on %s" % (name, mesh))


def test_data_parallel_replicated_module_all_reduces_gradients():
    torch.manual_seed(1)
    model = MLP()
    x = torch.randn(256, 8)  # a batch much larger than the weights: all-reducing weight gradients is the cheap way
    want_loss, want = _reference(_copy(model), x)
    dp = _copy(model)
    for owner in (dp.norm, dp.up, dp.down):
        for name, p in list(owner.named_parameters(recurse=False)):
            setattr(owner, name, nn.Parameter(dtorch.distribute_tensor(p.detach(), LINE, [Replicate()])))
    dx = dtorch.distribute_tensor(x, LINE, [Shard(0)])
    loss = dp(dx).pow(2.0).mean()
    close(loss, want_loss, "loss")
    dtorch.sync()  # the counts are the workers': read them once the devices ran what came before
    before = _tensor._collective_count("all_reduce")
    gathers = _tensor._collective_count("all_gather")
    loss.backward()
    dtorch.sync()
    reduces = _tensor._collective_count("all_reduce") - before
    gathers = _tensor._collective_count("all_gather") - gathers
    print("data-parallel backward: %d all-reduce and %d all-gather calls (per device)" % (reduces, gathers))
    for name, p in dp.named_parameters():
        assert tuple(p.grad.placements) == (Replicate(),), (name, p.grad.placements)
        close(p.grad, want[name], "data-parallel grad of " + name)
    assert reduces > 0, "the partial sums of the replicated parameters' gradients are all-reduced"


run(globals())
