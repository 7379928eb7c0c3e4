"""torch.optim.lr_scheduler's schedules beyond LambdaLR and CosineAnnealingLR: each step's lr against the schedule's
closed form, step by step (the recursive and closed forms agree where nothing changes the lr by hand), warm-up chains
with SequentialLR, one-cycle momentum, plateaus, state dicts, and a schedule driving a distributed optimizer."""

import math

import dtorch
import torch
from dtorch import Shard
from torch.optim import SGD, Adam
from torch.optim import lr_scheduler as S
from _testing import raises, run


def opt(lr=1.0, cls=SGD, **kwargs):
    return cls([torch.zeros(2, requires_grad=True)], lr=lr, **kwargs)


def lrs(scheduler, steps):
    """The lr of the first group before each of `steps` steps, then after the last."""
    out = [scheduler.optimizer.param_groups[0]["lr"]]
    for _ in range(steps):
        scheduler.optimizer.step()
        scheduler.step()
        out.append(scheduler.optimizer.param_groups[0]["lr"])
    return out


def near(got, want, what):
    assert len(got) == len(want) and all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12) for g, w in zip(got, want)), \
        (what, got, want)


def test_step_multistep_exponential_constant_linear_polynomial_and_multiplicative():
    near(lrs(S.StepLR(opt(), step_size=2, gamma=0.1), 5), [1, 1, 0.1, 0.1, 0.01, 0.01], "StepLR")
    near(lrs(S.MultiStepLR(opt(), milestones=[1, 3, 3], gamma=0.5), 4), [1, 0.5, 0.5, 0.125, 0.125], "MultiStepLR")
    near(lrs(S.ExponentialLR(opt(), gamma=0.9), 3), [1, 0.9, 0.81, 0.729], "ExponentialLR")
    near(lrs(S.ConstantLR(opt(), factor=0.5, total_iters=2), 3), [0.5, 0.5, 1, 1], "ConstantLR")
    near(lrs(S.LinearLR(opt(), start_factor=0.5, total_iters=4), 5), [0.5, 0.625, 0.75, 0.875, 1, 1], "LinearLR")
    near(lrs(S.LinearLR(opt(2.0), start_factor=1.0, end_factor=0.25, total_iters=3), 4), [2, 1.5, 1, 0.5, 0.5], "decay")
    near(lrs(S.PolynomialLR(opt(), total_iters=4, power=2.0), 5), [1, 0.5625, 0.25, 0.0625, 0, 0], "PolynomialLR")
    near(lrs(S.MultiplicativeLR(opt(), lambda epoch: 0.5), 3), [1, 0.5, 0.25, 0.125], "MultiplicativeLR")
    raises(ValueError, S.LinearLR, opt(), start_factor=0, contains="Starting multiplicative factor")
    raises(ValueError, S.ConstantLR, opt(), factor=2.0, contains="between 0 and 1")
    s = S.StepLR(opt(), step_size=2, gamma=0.1)
    s.step(5)  # the deprecated epoch argument: the closed form
    near([s.get_last_lr()[0]], [0.01], "StepLR at epoch 5")


def test_warm_restarts_and_a_linear_warm_up_then_cosine():
    s = S.CosineAnnealingWarmRestarts(opt(), T_0=2, T_mult=2, eta_min=0.0)
    want = [1, 0.5, 1, 0.5 + 0.5 * math.cos(math.pi / 4), 0.5, 0.5 - 0.5 * math.cos(math.pi / 4), 1]
    near(lrs(s, 6), want, "CosineAnnealingWarmRestarts, periods 2 then 4")
    o = opt()
    warm = S.SequentialLR(o, [S.LinearLR(o, start_factor=0.25, total_iters=2), S.CosineAnnealingLR(o, T_max=2)],
                          milestones=[2])
    near(lrs(warm, 4), [0.25, 0.625, 1, 0.5, 0], "LinearLR for 2 epochs, then CosineAnnealingLR from its start")
    raises(ValueError, S.SequentialLR, o, [S.StepLR(o, 1)], milestones=[1], contains="number of milestone points")


def test_one_cycle_cycles_the_lr_and_the_momentum():
    s = S.OneCycleLR(opt(cls=SGD, momentum=0.9), max_lr=1.0, total_steps=10, pct_start=0.3, div_factor=10,
                     final_div_factor=100)
    group = s.optimizer.param_groups[0]
    assert math.isclose(group["lr"], 0.1) and math.isclose(group["momentum"], 0.95)
    seen = lrs(s, 9)
    peak = seen.index(max(seen))
    assert peak == 2 and math.isclose(seen[2], 1.0), seen  # the rise ends at pct_start * total_steps - 1
    assert math.isclose(seen[-1], 0.1 / 100) and all(a >= b for a, b in zip(seen[2:], seen[3:])), seen
    assert math.isclose(group["momentum"], 0.95)
    s.step()  # the 10th step of 10
    raises(ValueError, s.step, contains="Tried to step 11 times")
    adam = S.OneCycleLR(opt(cls=Adam), max_lr=0.01, total_steps=4, anneal_strategy="linear")
    assert adam.optimizer.param_groups[0]["betas"][0] == 0.95
    raises(ValueError, S.OneCycleLR, opt(), max_lr=1.0, contains="total_steps OR (epochs AND steps_per_epoch)")


def test_reduce_on_plateau_waits_patience_then_cools_down():
    s = S.ReduceLROnPlateau(opt(), mode="min", factor=0.5, patience=1, cooldown=1, min_lr=0.2)
    seen = []
    for metric in [1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]:
        s.step(metric)
        seen.append(s.get_last_lr()[0])
    near(seen, [1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25], "halved after two bad epochs, one epoch of cooldown")
    for _ in range(4):
        s.step(0.9)
    assert s.get_last_lr()[0] == 0.2, "never below min_lr"
    restored = S.ReduceLROnPlateau(opt(), factor=0.5)
    restored.load_state_dict(s.state_dict())
    assert restored.best == 0.9 and restored.min_lrs == [0.2]
    raises(ValueError, S.ReduceLROnPlateau, opt(), factor=1.0, contains="Factor should be < 1.0")


def test_state_dicts_resume_a_schedule():
    o = opt()
    s = S.MultiStepLR(o, milestones=[2, 4], gamma=0.5)
    for _ in range(3):
        o.step()
        s.step()
    o2 = opt()
    o2.load_state_dict(o.state_dict())
    s2 = S.MultiStepLR(o2, milestones=[9], gamma=0.1, last_epoch=-1)
    s2.load_state_dict(s.state_dict())
    o2.param_groups[0]["lr"] = o.param_groups[0]["lr"]
    near(lrs(s2, 2), lrs(s, 2), "the resumed schedule continues as the original")


def test_a_schedule_drives_a_distributed_optimizer():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    w = dtorch.distribute_tensor(torch.ones(8), mesh, [Shard(0)]).requires_grad_(True)
    o = SGD([w], lr=1.0)
    s = S.StepLR(o, step_size=1, gamma=0.5)
    for _ in range(3):
        o.zero_grad()
        (w * 1.0).sum().backward()
        o.step()
        s.step()
    assert torch.allclose(w.full_tensor(), torch.full((8,), 1 - 1.0 - 0.5 - 0.25)), w.full_tensor()


run(globals())
