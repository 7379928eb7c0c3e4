"""torch.nn modules whose parameters are distributed tensors (nn.Parameter(dtorch.distribute_tensor(...))) on a
4-device mesh, replicated and sharded, give the plain module's output; torch.* and torch.nn.functional.* calls that get
dtorch.Tensors run on dtorch; state_dicts move between plain and distributed modules; torch.nn.init draws distributed
parameters reproducibly."""

import math

import dtorch
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init
from dtorch import Replicate, Shard
from _testing import raises, run

MESH = dtorch.init_device_mesh("cpu", (4,))


def close(got, want, what, atol=1e-5):
    value = got.full_tensor() if isinstance(got, dtorch.Tensor) else got
    assert value.shape == want.shape and value.dtype == want.dtype, (what, value.shape, want.shape, value.dtype)
    assert torch.allclose(value, want, rtol=1e-4, atol=atol), (what, (value - want).abs().max().item())


def distribute(module, plan, mesh=MESH):
    """Replaces every parameter of `module` by a distributed one with the placements `plan` names (Replicate if not
    named), as a tensor-parallel plan does."""
    for name, param in list(module.named_parameters()):
        owner_name, _, attr = name.rpartition(".")
        owner = module.get_submodule(owner_name)
        placements = plan.get(name, [Replicate()])
        setattr(owner, attr, nn.Parameter(dtorch.distribute_tensor(param.data, mesh, placements)))
    return module


class MLP(nn.Module):
    def __init__(self, dim=8, hidden=16):
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.act = nn.SiLU()
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


def plain_and_distributed(plan, seed=11):
    torch.manual_seed(seed)
    plain = MLP()
    torch.manual_seed(seed)
    return plain, distribute(MLP(), plan)


def test_two_layer_mlp_with_replicated_parameters_gives_the_plain_output():
    plain, dist = plain_and_distributed({})
    x = torch.randn(6, 8)
    for placements in ([Replicate()], [Shard(0)]):
        out = dist(dtorch.distribute_tensor(x, MESH, placements))
        assert isinstance(out, dtorch.Tensor)
        close(out, plain(x), ("replicated parameters", placements))


def test_two_layer_mlp_sharded_column_then_row_gives_the_plain_output():
    plan = {"up.weight": [Shard(0)], "up.bias": [Shard(0)], "down.weight": [Shard(1)]}
    plain, dist = plain_and_distributed(plan)
    assert dist.up.weight.placements == (Shard(0),) and dist.down.weight.placements == (Shard(1),)
    x = torch.randn(5, 3, 8)
    out = dist(dtorch.distribute_tensor(x, MESH, [Replicate()]))
    close(out, plain(x), "column-wise up, row-wise down")
    uneven = {"up.weight": [Shard(1)], "down.weight": [Shard(0)], "down.bias": [Shard(0)], "norm.weight": [Shard(0)]}
    plain, dist = plain_and_distributed(uneven, seed=12)
    close(dist(dtorch.distribute_tensor(x, MESH, [Shard(1)])), plain(x), "sharded the other way, input sharded")


def test_distributed_parameters_are_parameters_of_the_module():
    torch.manual_seed(3)
    lin = nn.Linear(4, 8)
    p = nn.Parameter(dtorch.distribute_tensor(lin.weight.data, MESH, [Shard(0)]))
    assert isinstance(p, nn.Parameter) and isinstance(p, dtorch.Tensor) and not isinstance(p, torch.Tensor)
    assert p.requires_grad and p.grad is None and not nn.Parameter(p, requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\nTensor(shape=(8, 4)")
    lin.weight = p
    assert lin._parameters["weight"] is p and [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    assert type(p * 2) is dtorch.Tensor and type(p.data) is dtorch.Tensor
    raises(TypeError, setattr, lin, "weight", dtorch.distribute_tensor(torch.ones(8, 4), MESH, [Replicate()]),
           contains="cannot assign 'dtorch.Tensor' as parameter 'weight'")
    lin.register_buffer("steps", dtorch.distribute_tensor(torch.arange(4), MESH, [Replicate()]))
    assert isinstance(lin.steps, dtorch.Tensor)
    lin.requires_grad_(False)
    assert not lin.weight.requires_grad and not lin.bias.requires_grad


def test_state_dicts_move_between_plain_and_distributed_modules():
    plan = {"up.weight": [Shard(0)], "up.bias": [Shard(0)], "down.weight": [Shard(1)]}
    plain, dist = plain_and_distributed(plan, seed=21)
    sd = dist.state_dict()
    assert list(sd) == list(plain.state_dict()) and isinstance(sd["up.weight"], dtorch.Tensor)
    assert not isinstance(sd["up.weight"], nn.Parameter) and sd["up.weight"].placements == (Shard(0),)
    torch.manual_seed(99)
    fresh = MLP()
    assert fresh.load_state_dict(sd).missing_keys == []  # distributed values come whole into a plain module
    x = torch.randn(4, 8)
    close(fresh(x), plain(x), "plain module loaded from a distributed state_dict")
    torch.manual_seed(98)
    other = distribute(MLP(), plan)
    weight = other.up.weight
    other.load_state_dict(plain.state_dict())  # plain values are spread onto each parameter's placements
    assert other.up.weight is weight and other.up.weight.placements == (Shard(0),)
    close(other(dtorch.distribute_tensor(x, MESH, [Replicate()])), plain(x), "distributed module loaded from plain")
    wrong = plain.state_dict()
    wrong["up.weight"] = torch.zeros(3, 8)
    raises(RuntimeError, other.load_state_dict, wrong, contains="size mismatch for up.weight: copying a param with "
           "shape torch.Size([3, 8]) from checkpoint, the shape in current model is torch.Size([16, 8]).")


def test_module_to_casts_distributed_parameters_and_keeps_their_mesh():
    torch.manual_seed(4)
    plain = nn.Linear(4, 6)
    dist = distribute(nn.Linear(4, 6), {"weight": [Shard(0)]})
    dist.load_state_dict(plain.state_dict())
    weight = dist.weight
    assert dist.to(torch.float64) is dist and dist.weight is weight
    assert dist.weight.dtype == torch.float64 and dist.weight.placements == (Shard(0),)
    x = torch.randn(3, 4, dtype=torch.float64)
    close(dist(dtorch.distribute_tensor(x, MESH, [Replicate()])), plain.double()(x), "float64")
    assert dist.to("cpu") is dist
    raises(ValueError, dist.to, "cuda", contains="stays on its mesh of cpu devices")


def test_every_layer_runs_on_distributed_parameters():
    torch.manual_seed(5)
    x = dtorch.distribute_tensor(torch.randn(2, 4, 6, 6), MESH, [Shard(0)])
    whole = x.full_tensor()
    ids = torch.tensor([[1, 5, 9], [0, 0, 3]])
    cases = [
        (nn.Linear(6, 8), {"weight": [Shard(0)], "bias": [Shard(0)]}, x),
        (nn.Embedding(10, 4, padding_idx=0), {"weight": [Shard(1)]}, ids),
        (nn.LayerNorm(6), {"weight": [Shard(0)]}, x),
        (nn.RMSNorm([6, 6]), {"weight": [Shard(1)]}, x),
        (nn.GroupNorm(2, 4), {}, x),
        (nn.Conv2d(4, 8, 3, padding=1), {"weight": [Shard(0)], "bias": [Shard(0)]}, x),
        (nn.Conv2d(4, 4, 3, padding=1, groups=2, bias=False), {"weight": [Shard(0)]}, x),
        (nn.Sequential(nn.GELU("tanh"), nn.ReLU(), nn.SiLU(), nn.Identity()), {}, x),
    ]
    for module, plan, given in cases:
        want = module(given if isinstance(given, torch.Tensor) else whole)
        distribute(module, plan)
        arg = given if isinstance(given, dtorch.Tensor) else dtorch.distribute_tensor(given, MESH, [Replicate()])
        close(module(arg), want, repr(module))


def test_dropout_on_distributed_tensors():
    x = dtorch.distribute_tensor(torch.rand(64, 32) + 1.0, MESH, [Shard(0)])
    drop = nn.Dropout(0.25)
    dtorch.manual_seed(5)
    out = drop(x).full_tensor()
    whole = x.full_tensor()
    zeros = (out == 0).sum().item() / out.numel()
    assert 0.2 < zeros < 0.3, zeros
    kept = out != 0
    assert torch.allclose(out[kept], whole[kept] / 0.75)
    dtorch.manual_seed(5)
    assert torch.equal(drop(x).full_tensor(), out), "the mask is seeded by dtorch.manual_seed"
    close(drop.eval()(x), whole, "evaluation")


def test_torch_functions_run_on_distributed_tensors():
    torch.manual_seed(6)
    a, b = torch.randn(4, 6), torch.randn(6, 8)
    da = dtorch.distribute_tensor(a, MESH, [Shard(0)])
    db = dtorch.distribute_tensor(b, MESH, [Shard(1)])
    close(torch.matmul(da, db), a @ b, "torch.matmul")
    close(da @ db, a @ b, "@")
    close(torch.cat([da, da], dim=1), torch.cat([a, a], dim=1), "torch.cat")
    close(torch.softmax(da, -1), torch.softmax(a, -1), "torch.softmax")
    close(F.softmax(da, dim=0), F.softmax(a, dim=0), "F.softmax")
    close(F.silu(da), F.silu(a), "F.silu")
    close(F.gelu(da, approximate="tanh"), F.gelu(a, approximate="tanh"), "F.gelu tanh")
    close(F.layer_norm(da, [6]), F.layer_norm(a, [6]), "F.layer_norm")
    close(F.rms_norm(da, [6], eps=1e-6), F.rms_norm(a, [6], eps=1e-6), "F.rms_norm")
    close(torch.add(da, da, alpha=2), a * 3, "torch.add alpha")
    close(torch.einsum("ij,jk->ik", [da, db]), a @ b, "torch.einsum")
    close(torch.mul(da, torch.tensor(2.5)), a * 2.5, "0-dimensional torch.Tensor replicated")
    q, k, v = (torch.randn(2, 4, 5, 8) for _ in range(3))
    dq, dk, dv = (dtorch.distribute_tensor(t, MESH, [Shard(1)]) for t in (q, k, v))
    close(F.scaled_dot_product_attention(dq, dk, dv, is_causal=True),
          F.scaled_dot_product_attention(q, k, v, is_causal=True), "F.scaled_dot_product_attention")
    weight = torch.randn(10, 4)
    ids = torch.tensor([3, 1, 9])
    dw = dtorch.distribute_tensor(weight, MESH, [Shard(1)])
    close(F.embedding(dtorch.distribute_tensor(ids, MESH, [Replicate()]), dw), F.embedding(ids, weight), "F.embedding")


def test_mixed_torch_and_distributed_tensors_are_refused_as_pytorch_refuses_them():
    da = dtorch.distribute_tensor(torch.ones(4, 4), MESH, [Shard(0)])
    raises(RuntimeError, torch.matmul, torch.ones(4, 4), da, contains="aten.matmul: got mixed torch.Tensor and "
           "dtorch.Tensor; distribute the torch.Tensor of shape (4, 4) first")
    raises(RuntimeError, torch.cat, [da, torch.ones(4, 4)], contains="got mixed torch.Tensor and dtorch.Tensor")
    raises(RuntimeError, F.linear, da, torch.ones(2, 4), contains="aten.linear: got mixed")
    plain = nn.Linear(4, 2)
    raises(RuntimeError, plain, da, contains="got mixed")


def test_init_draws_distributed_parameters_reproducibly():
    def drawn(seed):
        dtorch.manual_seed(seed)
        t = dtorch.distribute_tensor(torch.zeros(64, 48), MESH, [Shard(0)])
        init.kaiming_uniform_(t, a=math.sqrt(5))
        return t

    first = drawn(1).full_tensor()
    bound = 1 / math.sqrt(48)
    assert first.abs().max().item() <= bound and first.abs().max().item() > 0.9 * bound
    assert torch.equal(drawn(1).full_tensor(), first) and not torch.equal(drawn(2).full_tensor(), first)
    replicated = dtorch.distribute_tensor(torch.zeros(2000), MESH, [Replicate()])
    init.normal_(replicated, 1.0, 2.0)
    locals_ = replicated.to_local()
    assert all(torch.equal(t, locals_[0]) for t in locals_), "replicas draw the same values"
    whole = replicated.full_tensor()
    assert abs(whole.mean().item() - 1.0) < 0.15 and abs(whole.std().item() - 2.0) < 0.15
    init.trunc_normal_(replicated, std=0.02, a=-0.04, b=0.04)
    truncated = replicated.full_tensor()
    assert truncated.abs().max().item() <= 0.04 and truncated.abs().max().item() > 0.039
    assert init.zeros_(replicated).full_tensor().abs().sum().item() == 0.0
    assert (init.constant_(replicated, 0.5).full_tensor() == 0.5).all().item()


def test_distributed_tensors_take_the_values_of_parameters_without_their_autograd_history():
    weight = nn.Parameter(torch.randn(8, 4))
    spread = dtorch.distribute_tensor(weight, MESH, [Shard(0)])
    back = (spread * 2).full_tensor()
    assert not back.requires_grad and back.is_leaf, "the workers recorded nothing into the parameter's graph"
    with torch.no_grad():
        assert torch.equal(back, weight * 2)
    tracked = torch.ones(2, 4, requires_grad=True) * 3
    shards = dtorch.Tensor.from_local([tracked] * 4, MESH, [Replicate()])
    assert not shards.full_tensor().requires_grad and not any(t.requires_grad for t in shards.to_local())
    assert weight.grad is None and tracked.grad_fn is not None


run(globals())
