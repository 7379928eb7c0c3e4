"""torch.optim and torch.nn.utils.clip_grad_norm_ on torch tensors: each optimizer, step by step, against PyTorch's
update formulas worked out here in plain Python floats (the gradient of the test loss is known in closed form), state
dicts, param_groups, the learning-rate schedules against their closed forms, and gradient clipping."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _testing import close, iterations, raises, run

START = [1.0, -2.0, 0.5]
A = [2.0, 0.5, 1.0]
B = [0.3, -1.0, 0.25]


def loss_of(p):
    """sum(a p^2 / 2 + b p): its gradient is a p + b, element by element."""
    a = torch.tensor(A, dtype=p.dtype)
    b = torch.tensor(B, dtype=p.dtype)
    return (a * p * p / 2 + b * p).sum()


def grad_of(values):
    return [a * x + b for a, x, b in zip(A, values, B)]


def run_steps(optimizer_type, steps, dtype=torch.float64, **kwargs):
    p = torch.tensor(START, dtype=dtype, requires_grad=True)
    opt = optimizer_type([p], **kwargs)
    for _ in range(steps):
        opt.zero_grad()
        loss_of(p).backward()
        opt.step()
    return p, opt


def sgd_reference(steps, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    p = list(START)
    bufs = None
    for _ in range(steps):
        g = grad_of(p)
        if maximize:
            g = [-x for x in g]
        g = [x + weight_decay * w for x, w in zip(g, p)]
        if momentum != 0:
            bufs = list(g) if bufs is None else [momentum * b + (1 - dampening) * x for b, x in zip(bufs, g)]
            g = [x + momentum * b for x, b in zip(g, bufs)] if nesterov else bufs
        p = [w - lr * x for w, x in zip(p, g)]
    return p


def adam_reference(steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False,
                   maximize=False):
    b1, b2 = betas
    p = list(START)
    m = [0.0] * 3
    v = [0.0] * 3
    v_max = [0.0] * 3
    for t in range(1, steps + 1):
        g = grad_of(p)
        if maximize:
            g = [-x for x in g]
        if decoupled:
            p = [w * (1 - lr * weight_decay) for w in p]
        else:
            g = [x + weight_decay * w for x, w in zip(g, p)]
        m = [b1 * mi + (1 - b1) * x for mi, x in zip(m, g)]
        v = [b2 * vi + (1 - b2) * x * x for vi, x in zip(v, g)]
        v_max = [max(a, b) for a, b in zip(v_max, v)]
        used = v_max if amsgrad else v
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        p = [w - lr / bc1 * mi / (math.sqrt(vi) / math.sqrt(bc2) + eps) for w, mi, vi in zip(p, m, used)]
    return p, m, v


def test_sgd_follows_pytorchs_update_step_by_step():
    for kwargs in ({"lr": 0.1}, {"lr": 0.1, "momentum": 0.9}, {"lr": 0.05, "momentum": 0.9, "dampening": 0.3},
                   {"lr": 0.1, "momentum": 0.8, "nesterov": True}, {"lr": 0.1, "weight_decay": 0.2, "momentum": 0.5},
                   {"lr": 0.1, "maximize": True}):
        for fused in (None, True):
            p, opt = run_steps(torch.optim.SGD, 3, fused=fused, **kwargs)
            close(p.tolist(), sgd_reference(3, **kwargs), 1e-12)
            if kwargs.get("momentum"):
                assert opt.state[p]["momentum_buffer"].shape == (3,), (kwargs, fused)
            else:
                assert "momentum_buffer" not in opt.state[p]
    raises(ValueError, torch.optim.SGD, [torch.ones(1, requires_grad=True)], lr=0.1, nesterov=True,
           contains="Nesterov momentum requires a momentum and zero dampening")
    raises(ValueError, torch.optim.SGD, [torch.ones(1, requires_grad=True)], lr=-1.0, contains="Invalid learning rate")
    raises(ValueError, torch.optim.SGD, [], contains="empty parameter list")


def test_adam_and_adamw_follow_pytorchs_update_fused_and_multi_tensor():
    # (optimizer, its arguments, the reference's arguments)
    cases = [(torch.optim.Adam, {"lr": 0.1}, {"lr": 0.1}),
             (torch.optim.Adam, {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1},
              {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
             (torch.optim.Adam, {"lr": 0.1, "amsgrad": True}, {"lr": 0.1, "amsgrad": True}),
             (torch.optim.Adam, {"lr": 0.1, "maximize": True}, {"lr": 0.1, "maximize": True}),
             (torch.optim.AdamW, {"lr": 0.1}, {"lr": 0.1, "weight_decay": 1e-2, "decoupled": True}),
             (torch.optim.AdamW, {"lr": 0.1, "weight_decay": 0.3, "amsgrad": True},
              {"lr": 0.1, "weight_decay": 0.3, "amsgrad": True, "decoupled": True})]
    for optimizer_type, kwargs, reference_kwargs in cases:
        expected, m, v = adam_reference(3, **reference_kwargs)
        for fused in (None, False):
            p, opt = run_steps(optimizer_type, 3, fused=fused, **kwargs)
            what = "%s %s fused=%s" % (optimizer_type.__name__, kwargs, fused)
            close(p.tolist(), expected, 1e-9)
            state = opt.state[p]
            assert state["step"].item() == 3.0 and state["step"].dtype == torch.float32, what
            close(state["exp_avg"].tolist(), m, 1e-9)
            close(state["exp_avg_sq"].tolist(), v, 1e-9)
            assert ("max_exp_avg_sq" in state) == bool(kwargs.get("amsgrad")), what
    p, _ = run_steps(torch.optim.Adam, 3, dtype=torch.float32, lr=0.1)
    close(p.tolist(), adam_reference(3, lr=0.1)[0], 1e-5)
    raises(ValueError, torch.optim.Adam, [torch.ones(1, requires_grad=True)], betas=(1.0, 0.9),
           contains="Invalid beta parameter at index 0")
    raises(RuntimeError, torch.optim.Adam, [torch.ones(1, requires_grad=True)], fused=True, foreach=True,
           contains="cannot be `True` together")


def test_param_groups_set_the_lr_of_each_group_and_skip_parameters_without_gradients():
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([1.0], requires_grad=True)
    frozen = torch.tensor([1.0], requires_grad=True)
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b, frozen], "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5] and opt.param_groups[1]["momentum"] == 0
    ((a + b) * 2).sum().backward()
    opt.step()
    close([a.item(), b.item(), frozen.item()], [1.0 - 0.2, 1.0 - 1.0, 1.0])
    opt.param_groups[0]["lr"] = 1.0
    opt.step()
    close(a.item(), 0.8 - 2.0)
    raises(ValueError, opt.add_param_group, {"params": [a]}, contains="more than one parameter group")
    raises(ValueError, torch.optim.SGD, [a * 2], lr=0.1, contains="non-leaf")


def test_zero_grad_clears_or_zeroes_every_gradient():
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(4, 3)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_state_dict_round_trips_in_pytorchs_layout():
    torch.manual_seed(21)
    first = nn.Linear(3, 2)
    second = nn.Linear(3, 2)
    second.load_state_dict(first.state_dict())
    x = torch.randn(5, 3)
    opt = torch.optim.Adam(first.parameters(), lr=0.05, amsgrad=True)
    for _ in range(2):
        opt.zero_grad()
        first(x).pow(2).sum().backward()
        opt.step()
    saved = opt.state_dict()
    assert sorted(saved["state"]) == [0, 1] and saved["param_groups"][0]["params"] == [0, 1]
    assert saved["param_groups"][0]["lr"] == 0.05 and saved["param_groups"][0]["amsgrad"] is True
    assert sorted(saved["state"][0]) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    with torch.no_grad():
        second.weight.copy_(first.weight)
        second.bias.copy_(first.bias)
    resumed = torch.optim.Adam(second.parameters(), lr=0.5)
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == 0.05 and resumed.param_groups[0]["params"][0] is second.weight
    for model, optimizer in ((first, opt), (second, resumed)):
        optimizer.zero_grad()
        model(x).pow(2).sum().backward()
        optimizer.step()
    assert torch.equal(first.weight, second.weight) and torch.equal(first.bias, second.bias)
    assert opt.state[first.weight]["step"].item() == 3.0 and resumed.state[second.weight]["step"].item() == 3.0, \
        "the loaded state is a copy: stepping one optimizer leaves the other's alone"
    raises(ValueError, torch.optim.Adam([torch.ones(1, requires_grad=True)]).load_state_dict, saved,
           contains="doesn't match the size of optimizer's group")


def test_lambda_lr_and_cosine_annealing_follow_their_closed_forms():
    p = torch.ones(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.4)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.5 ** epoch)
    seen = [schedule.get_last_lr()[0]]
    for _ in range(3):
        opt.step()
        schedule.step()
        seen.append(opt.param_groups[0]["lr"])
    close(seen, [0.4, 0.2, 0.1, 0.05])
    state = schedule.state_dict()
    assert state["last_epoch"] == 3 and state["lr_lambdas"] == [None] and state["base_lrs"] == [0.4]

    opt = torch.optim.SGD([p], lr=1.0)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.1)
    lrs = [cosine.get_last_lr()[0]]
    for _ in range(8):
        cosine.step()
        lrs.append(cosine.get_last_lr()[0])
    closed = [0.1 + 0.9 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(9)]
    close(lrs, closed, 1e-12)
    saved = cosine.state_dict()
    again = torch.optim.lr_scheduler.CosineAnnealingLR(torch.optim.SGD([p], lr=1.0), T_max=4, eta_min=0.1)
    again.load_state_dict(saved)
    again.optimizer.param_groups[0]["lr"] = lrs[-1]
    again.step()
    cosine.step()
    close(again.get_last_lr(), cosine.get_last_lr(), 1e-12)


def test_clip_grad_norm_scales_to_the_bound_and_returns_the_total_norm():
    a = torch.zeros(2, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    a.grad = torch.tensor([3.0, 4.0])
    b.grad = torch.tensor([12.0])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=6.5)
    close(total.item(), 13.0)
    scale = 6.5 / (13.0 + 1e-6)
    close(a.grad.tolist() + b.grad.tolist(), [3.0 * scale, 4.0 * scale, 12.0 * scale])
    close(nn.utils.clip_grad_norm_([a, b], max_norm=100.0).item(), 6.5, 1e-5)
    close(b.grad.item(), 12.0 * scale, 1e-6)
    b.grad = torch.tensor([-12.0])
    close(nn.utils.clip_grad_norm_([a, b], 1e9, norm_type=float("inf")).item(), 12.0)
    b.grad = torch.tensor([float("nan")])
    raises(RuntimeError, nn.utils.clip_grad_norm_, [a, b], 1.0, error_if_nonfinite=True, contains="non-finite")
    assert nn.utils.clip_grad_norm_([torch.zeros(1, requires_grad=True)], 1.0).item() == 0.0
    b.grad = torch.tensor([5.0])
    nn.utils.clip_grad_value_(b, 2.0)
    assert b.grad.tolist() == [2.0]


def test_a_small_model_learns_with_adamw_and_a_cosine_schedule():
    torch.manual_seed(22)
    x = torch.randn(64, 2)
    y = x @ torch.tensor([[2.0], [-3.0]]) + 0.5
    model = nn.Sequential(nn.Linear(2, 8), nn.GELU(), nn.Linear(8, 1))
    steps = iterations(30, 150)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=0.005)
    first = None
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        schedule.step()
        first = loss.item() if first is None else first
    final = F.mse_loss(model(x), y).item()
    drop = 10 if steps < 100 else 100
    assert final < first / drop, "loss %.4f after %d steps, %.4f at the start" % (final, steps, first)


run(globals())
