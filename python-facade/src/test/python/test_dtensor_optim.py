"""Optimizers on distributed parameters: SGD (momentum, weight decay, nesterov), Adam and AdamW update each device's
own shards, with one multi-tensor call per step and device and no communication, and match the shim's one-device
optimizers step by step (parameters to rtol 1e-4, atol 1e-5); clip_grad_norm_ over distributed gradients takes the
total norm across shards with one reduction; zero_grad clears distributed gradients. A small MLP trained a few steps
with tensor-parallel and with data-parallel parameters gives the one-device losses to 1e-4 relative."""

import dtorch
import torch
import torch.nn as nn
import torch.nn.functional as F
from dtorch import Replicate, Shard, _tensor
from dtorch.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from _models import MLP
from _testing import run

LINE = dtorch.init_device_mesh("cpu", (4,))
GRID = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))

OPTIMIZERS = [
    ("SGD", lambda ps: torch.optim.SGD(ps, lr=0.1)),
    ("SGD momentum", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD nesterov", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True)),
    ("Adam", lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.1)),
    ("AdamW", lambda ps: torch.optim.AdamW(ps, lr=0.01)),
    ("AdamW amsgrad", lambda ps: torch.optim.AdamW(ps, lr=0.01, amsgrad=True)),
]


def close(got, want, what, rtol=1e-4, atol=1e-5):
    value = got.full_tensor() if isinstance(got, dtorch.Tensor) else got
    assert torch.allclose(value, want, rtol=rtol, atol=atol), "%s: differs by %s" % (what, (value - want).abs().max().item())


def test_optimizers_update_shards_like_one_device():
    torch.manual_seed(3)
    values = [torch.randn(7, 5), torch.randn(5), torch.randn(3, 6)]
    layouts = [(LINE, [Shard(0)]), (LINE, [Replicate()]), (LINE, [Shard(1)])]
    for name, make in OPTIMIZERS:
        local = [v.clone().requires_grad_() for v in values]
        dist = [dtorch.distribute_tensor(v, m, p).requires_grad_() for v, (m, p) in zip(values, layouts)]
        opt_local, opt_dist = make(local), make(dist)
        for step in range(3):
            for ps, opt in ((local, opt_local), (dist, opt_dist)):
                opt.zero_grad()
                loss = (ps[0].sum(0) * ps[1]).pow(2.0).sum() + ps[2].tanh().sum()
                loss.backward()
            dtorch.sync()
            before = _tensor._collective_count("all_reduce"), _tensor._collective_count("all_gather")
            opt_local.step()
            opt_dist.step()
            dtorch.sync()
            after = _tensor._collective_count("all_reduce"), _tensor._collective_count("all_gather")
            assert before == after, "%s: the step communicated (%s -> %s)" % (name, before, after)
            for i, (p, q) in enumerate(zip(dist, local)):
                close(p, q.detach(), "%s step %d parameter %d" % (name, step, i))
                assert tuple(p.placements) == tuple(layouts[i][1]), name


def test_clip_grad_norm_takes_the_total_norm_across_shards():
    # The 2-norm, and the other orders torch takes: 1, 3, 0 (non-zero count), inf and -inf.
    for norm_type in (2.0, 1.0, 3.0, 0.0, float("inf"), float("-inf")):
        torch.manual_seed(4)
        values = [torch.randn(9, 4) * 3, torch.randn(6) * 5]
        local = [v.clone().requires_grad_() for v in values]
        dist = [dtorch.distribute_tensor(values[0], GRID, [Shard(0), Shard(1)]).requires_grad_(),
                dtorch.distribute_tensor(values[1], GRID, [Replicate(), Shard(0)]).requires_grad_()]
        for ps in (local, dist):
            (ps[0].pow(2.0).sum() + ps[1].pow(3.0).sum()).backward()
        want = torch.nn.utils.clip_grad_norm_(local, 1.0, norm_type)
        got = torch.nn.utils.clip_grad_norm_(dist, 1.0, norm_type)
        close(got, want, "total norm of order %s" % norm_type)
        for i, (p, q) in enumerate(zip(dist, local)):
            close(p.grad, q.grad, "clipped gradient %d, order %s" % (i, norm_type))


def _train(model, batches, targets, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    losses = []
    for i in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(batches[i]), targets[i])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        opt.step()
        losses.append(loss.item())
    return losses


def _replicate(module, mesh):
    for owner in list(module.modules()):
        for name, p in list(owner.named_parameters(recurse=False)):
            if not isinstance(p, dtorch.Tensor):
                setattr(owner, name, nn.Parameter(dtorch.distribute_tensor(p.detach(), mesh, [Replicate()] * mesh.ndim)))
    return module


def test_tensor_and_data_parallel_training_matches_one_device_losses():
    torch.manual_seed(5)
    reference = MLP()
    state = {k: v.detach().clone() for k, v in reference.state_dict().items()}  # the values before training
    steps = 4
    batches = [torch.randn(16, 8) for _ in range(steps)]
    targets = [torch.randn(16, 8) for _ in range(steps)]
    want = _train(reference, batches, targets, steps)

    tp = MLP()
    tp.load_state_dict(state)
    parallelize_module(tp, LINE, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    _replicate(tp, LINE)
    rep = [Replicate()]
    got_tp = _train(tp, [dtorch.distribute_tensor(b, LINE, rep) for b in batches],
                    [dtorch.distribute_tensor(t, LINE, rep) for t in targets], steps)

    dp = _replicate(MLP(), LINE)
    dp.load_state_dict(state)
    got_dp = _train(dp, [dtorch.distribute_tensor(b, LINE, [Shard(0)]) for b in batches],
                    [dtorch.distribute_tensor(t, LINE, [Shard(0)]) for t in targets], steps)
    for what, got in (("tensor parallel", got_tp), ("data parallel", got_dp)):
        for step, (g, w) in enumerate(zip(got, want)):
            assert abs(g - w) <= 1e-4 * abs(w), "%s step %d: loss %r, one device %r" % (what, step, g, w)


run(globals())
