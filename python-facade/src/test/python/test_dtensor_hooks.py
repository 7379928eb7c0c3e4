"""Gradient hooks, retain_grad and higher derivatives (create_graph=True) of distributed tensors, and Tensor.to's
signatures. Gradients are compared with the shim's one-device autograd on the same values (full_tensor(), rtol 1e-4,
atol 1e-5): a hook's replacement of a gradient against the same scaling written into the program, retained gradients
against torch's retain_grad, second derivatives and a gradient penalty on a tensor-parallel MLP against the shim's
create_graph."""

import dtorch
import torch
import torch.nn as nn
import torch.nn.functional as F
from dtorch import Replicate, Shard
from dtorch.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from _testing import close_tensor as close, raises, run

LINE = dtorch.init_device_mesh("cpu", (4,))
GRID = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))


def _pair(shape, mesh, placements):
    x = torch.randn(*shape)
    return x.requires_grad_(), dtorch.distribute_tensor(x.detach(), mesh, placements).requires_grad_()


# ---- hooks ----

def test_a_leaf_hook_sees_the_gradient_on_the_leaf_placements_and_its_result_replaces_it():
    x, d = _pair((6, 5), GRID, [Shard(1), Shard(0)])
    seen = []
    handle = d.register_hook(lambda g: seen.append(g))
    doubled = d.register_hook(lambda g: g * 2.0)
    (d * d).sum().backward()
    assert len(seen) == 1 and tuple(seen[0].placements) == (Shard(1), Shard(0)), seen
    close(seen[0], 2 * x.detach(), "the gradient the first hook saw (still readable after backward)")
    close(d.grad, 4 * x.detach(), "the second hook's result, accumulated")
    handle.remove()
    handle.remove()  # idempotent
    doubled.remove()
    d.grad = None
    (d * d).sum().backward()
    assert len(seen) == 1, "a removed hook is not called"
    close(d.grad, 2 * x.detach(), "without hooks")


def test_a_hook_on_an_intermediate_tensor_changes_what_flows_on():
    x, d = _pair((4, 6), LINE, [Shard(0)])
    w, dw = _pair((6, 3), LINE, [Replicate()])
    h = d @ dw
    seen = []
    h.register_hook(lambda g: seen.append(g) or g * 3.0)
    h.tanh().sum().backward()
    th = x @ w
    th.retain_grad()
    th.tanh().sum().backward()
    close(seen[0], th.grad, "the gradient the hook saw")
    # the reference triples the same gradient with a multiplication where the hook sits
    (tx, tw) = (x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_())
    tripled = (tx @ tw) * 3.0 - (tx @ tw).detach() * 2.0  # value of tx @ tw, gradient tripled
    torch.tanh(tripled).sum().backward()
    close(d.grad, tx.grad, "x's gradient through the tripled one")
    close(dw.grad, tw.grad, "w's gradient through the tripled one")


def test_hooks_run_for_autograd_grad_and_the_bad_ones_are_refused():
    x, d = _pair((8,), LINE, [Shard(0)])
    d.register_hook(lambda g: g + 1.0)
    (gd,) = torch.autograd.grad((d * 2.0).sum(), [d])
    close(gd, torch.full((8,), 3.0), "grad() applies the input's hook")
    assert d.grad is None
    raises(RuntimeError, dtorch.ones(3, device_mesh=LINE).register_hook, lambda g: g, contains="doesn't require gradient")
    raises(TypeError, d.register_hook, 3, contains="callable")
    e = dtorch.randn(4, 4, device_mesh=LINE, placements=[Shard(0)], requires_grad=True)
    e.register_hook(lambda g: g.sum(0))
    raises(ValueError, lambda: (e * 1.0).sum().backward(), contains="shape")
    f = dtorch.randn(4, device_mesh=LINE, requires_grad=True)

    def failing(g):
        raise KeyError("from the hook")
    handle = f.register_hook(failing)
    raises(KeyError, lambda: (f * 1.0).sum().backward(), contains="from the hook")
    handle.remove()
    (f * 1.0).sum().backward()  # everything stays usable after a hook failed
    close(f.grad, torch.ones(4), "after a failing hook")
    g = dtorch.randn(4, device_mesh=LINE, requires_grad=True)
    g.register_hook(lambda grad: 1.0)
    raises(TypeError, lambda: g.sum().backward(), contains="dtorch.Tensor or None")


def test_retain_grad_keeps_an_intermediate_gradient_as_torch_does():
    x, d = _pair((5, 4), LINE, [Shard(1)])
    h = x.tanh()
    dh = d.tanh()
    h.retain_grad()
    dh.retain_grad()
    assert dh.retains_grad and not d.retains_grad
    d.retain_grad()  # a leaf keeps its gradient anyway
    (h * h).sum().backward(retain_graph=True)
    (dh * dh).sum().backward(retain_graph=True)
    close(dh.grad, h.grad, "the retained gradient")
    (h * 2.0).sum().backward()
    (dh * 2.0).sum().backward()
    close(dh.grad, h.grad, "accumulated over two passes")
    close(d.grad, x.grad, "the leaf's gradient")
    raises(RuntimeError, dtorch.ones(3, device_mesh=LINE).retain_grad, contains="requires_grad=False")


# ---- higher derivatives ----

def test_second_derivatives_of_x_cubed_and_sin():
    x, d = _pair((7, 3), LINE, [Shard(0)])
    (g,) = torch.autograd.grad(d.pow(3.0).sum(), [d], create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    (tg,) = torch.autograd.grad(x.pow(3.0).sum(), [x], create_graph=True)
    close(g, tg.detach(), "d/dx x^3", atol=1e-4)
    (g2,) = torch.autograd.grad(g.sum(), [d])
    (tg2,) = torch.autograd.grad(tg.sum(), [x])
    close(g2, tg2, "d2/dx2 x^3", atol=1e-4)
    d.sin().sum().backward(create_graph=True)
    x.sin().sum().backward(create_graph=True)
    assert d.grad.requires_grad
    (s2,) = torch.autograd.grad(d.grad.sum(), [d])
    (ts2,) = torch.autograd.grad(x.grad.sum(), [x])
    close(s2, ts2, "the gradient of sum(sin(x))'s gradient")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(6, 16)
        self.down = nn.Linear(16, 2)

    def forward(self, x):
        return self.down(torch.tanh(self.up(x)))


def _penalized(model, x, y, lam=0.1):
    """A gradient penalty: the loss plus lam times the squared norm of its gradient with respect to the parameters."""
    params = list(model.parameters())
    loss = F.mse_loss(model(x), y)
    grads = torch.autograd.grad(loss, params, create_graph=True)
    penalty = grads[0].pow(2.0).sum()
    for g in grads[1:]:
        penalty = penalty + g.pow(2.0).sum()
    return loss + penalty * lam


def test_a_gradient_penalty_on_a_tensor_parallel_mlp_matches_one_device():
    torch.manual_seed(3)
    model = MLP()
    x = torch.randn(10, 6)
    y = torch.randn(10, 2)
    twin = MLP()
    twin.load_state_dict(model.state_dict())
    want = _penalized(twin, x, y)
    want.backward()
    parallelize_module(model, LINE, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    got = _penalized(model, dtorch.distribute_tensor(x, LINE, [Replicate()]), dtorch.distribute_tensor(y, LINE, [Replicate()]))
    close(got, want.detach(), "the penalized loss")
    got.backward()
    for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        assert tuple(p.grad.placements) == tuple(p.placements), (name, p.grad.placements)
        close(p.grad, q.grad, "penalized gradient of " + name)


def test_double_backward_of_relu_and_sigmoid():
    x, d = _pair((3, 4), LINE, [Shard(1)])
    for fn in (torch.relu, torch.sigmoid):
        (g,) = torch.autograd.grad((fn(d) * d).sum(), [d], create_graph=True)
        (tg,) = torch.autograd.grad((fn(x) * x).sum(), [x], create_graph=True)
        (g2,) = torch.autograd.grad((g * g).sum(), [d])
        (tg2,) = torch.autograd.grad((tg * tg).sum(), [x])
        close(g2, tg2, "second derivative through " + fn.__name__)


# ---- mixed precision ----

class HalfMLP(MLP):
    """bfloat16 compute with float32 master weights: the forward casts the parameters and the input."""

    def forward(self, x):
        bf16 = torch.bfloat16
        h = torch.tanh(F.linear(x.to(bf16), self.up.weight.to(bf16), self.up.bias.to(bf16)))
        return F.linear(h, self.down.weight.to(bf16), self.down.bias.to(bf16)).to(torch.float32)


def test_bf16_compute_with_float32_weights_matches_one_device():
    torch.manual_seed(4)
    model = HalfMLP()
    twin = HalfMLP()
    twin.load_state_dict(model.state_dict())
    parallelize_module(model, GRID, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(12, 6)
        y = torch.randn(12, 2)
        want = F.mse_loss(twin(x), y)
        got = F.mse_loss(model(dtorch.distribute_tensor(x, GRID, [Shard(0), Replicate()])),
                         dtorch.distribute_tensor(y, GRID, [Shard(0), Replicate()]))
        assert got.dtype == torch.float32
        # bf16 keeps 8 bits of mantissa: the sums of the tensor-parallel layers round in another order than one device's
        assert abs(got.item() - want.item()) <= 2e-2 * abs(want.item()), (step, got.item(), want.item())
        if step == 0:
            exact = F.mse_loss(MLP.forward(twin, x), y).item()
            assert abs(exact - want.item()) > 1e-6, "the forward computes in bfloat16"
        want.backward()
        got.backward()
        for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
            assert p.dtype == torch.float32 and p.grad.dtype == torch.float32, (name, p.dtype, p.grad.dtype)
            assert tuple(p.grad.placements) == tuple(p.placements), (name, p.grad.placements)
            value = p.grad.full_tensor()
            assert torch.allclose(value, q.grad, rtol=5e-2, atol=2e-2), (name, (value - q.grad).abs().max().item())
        opt.step()
        twin_opt.step()
        opt.zero_grad()
        twin_opt.zero_grad()


# ---- Tensor.to ----

def test_to_takes_torch_signatures():
    d = dtorch.randn(4, 3, device_mesh=LINE, placements=[Shard(0)])
    kind = LINE.device_type
    assert d.to(torch.float64).dtype == torch.float64
    assert d.to("float64").dtype == torch.float64
    assert d.to(dtype=torch.bfloat16).dtype == torch.bfloat16
    assert d.to(kind) is d and d.to(torch.device(kind)) is d and d.to(device=kind, dtype=torch.float32) is d
    moved = d.to(kind, torch.float16)
    assert moved.dtype == torch.float16 and tuple(moved.placements) == (Shard(0),)
    assert d.to(torch.zeros(2, dtype=torch.float64)).dtype == torch.float64
    assert d.to(moved).dtype == torch.float16
    assert d.to(torch.float32, non_blocking=True) is d
    copied = d.to(torch.float32, copy=True)
    assert copied is not d
    close(copied, d.full_tensor(), "copy=True")
    assert d.to(memory_format=torch.contiguous_format).dtype == torch.float32
    other = "cuda" if kind == "cpu" else "cpu"
    raises(RuntimeError, d.to, other, contains="stays on the devices of its mesh")
    raises(RuntimeError, d.to, torch.float32, memory_format=torch.channels_last, contains="preserve_format")
    raises(TypeError, d.to, torch.float32, foo=1, contains="unexpected keyword")
    raises(TypeError, d.to, 3.5, contains="expected a device")
    leaf = dtorch.randn(3, device_mesh=LINE, requires_grad=True)
    leaf.to(torch.float64).sum().backward()
    assert leaf.grad.dtype == torch.float32


run(globals())
