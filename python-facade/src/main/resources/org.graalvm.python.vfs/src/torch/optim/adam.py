"""torch.optim.Adam and AdamW, with PyTorch's update for each parameter p with gradient g at step t:

    g = g (negated when maximize), + weight_decay * p for Adam, or p = p * (1 - lr * weight_decay) first for AdamW
    m = beta1 * m + (1 - beta1) * g            v = beta2 * v + (1 - beta2) * g * g
    v_max = max(v_max, v) with amsgrad (v_max stands for v below)
    p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

By default a step is ATen's fused kernel (_fused_adam_ / _fused_adamw_), one call per device and dtype; fused=False
runs the same update as a few multi-tensor (_foreach_*) calls.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from .._dispatch import require
from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, group_by_device_and_dtype, is_distributed, state_like, step_counter

_FOREACH_ADD_ = require("_foreach_add_")
_FOREACH_ADD = require("_foreach_add")
_FOREACH_NEG = require("_foreach_neg")
_FOREACH_MUL_ = require("_foreach_mul_")
_FOREACH_LERP_ = require("_foreach_lerp_")
_FOREACH_ADDCMUL_ = require("_foreach_addcmul_")
_FOREACH_ADDCDIV_ = require("_foreach_addcdiv_")
_FOREACH_MAXIMUM_ = require("_foreach_maximum_")
_FOREACH_SQRT = require("_foreach_sqrt")
_FOREACH_DIV_ = require("_foreach_div_")
_FUSED_ADAM_ = require("_fused_adam_")
_FUSED_ADAMW_ = require("_fused_adamw_")


class Adam(Optimizer):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, foreach=None,
    maximize=False, capturable=False, differentiable=False, fused=None, decoupled_weight_decay=False)"""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: %s" % lr)
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: %s" % eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: %s" % betas[0])
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: %s" % betas[1])
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: %s" % weight_decay)
        if capturable or differentiable:
            raise NotImplementedError("%s(capturable=True or differentiable=True) is not supported" % type(self).__name__)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    @no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; returns the closure's loss (None without one)."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            amsgrad = group["amsgrad"]
            params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = [], [], [], [], [], []
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = step_counter(p)
                    state["exp_avg"] = state_like(p)
                    state["exp_avg_sq"] = state_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = state_like(p)
                params.append(p)
                grads.append(grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                max_exp_avg_sqs.append(state.get("max_exp_avg_sq"))
                steps.append(state["step"])
            if not params:
                continue
            distributed = is_distributed(params[0])
            update = _foreach_adam if (group["fused"] is False or group["foreach"]) and not distributed else _fused_adam
            for columns in group_by_device_and_dtype(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps).values():
                update(*columns, group=group)
        return loss


class AdamW(Adam):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *, maximize=False,
    foreach=None, capturable=False, differentiable=False, fused=None): Adam with decoupled weight decay."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused, decoupled_weight_decay=True)


def _fused_adam(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list, max_exp_avg_sqs: list, steps: list,
                group: dict) -> None:
    beta1, beta2 = group["betas"]
    _FOREACH_ADD_(steps, 1)
    kernel = _FUSED_ADAMW_ if group["decoupled_weight_decay"] else _FUSED_ADAM_
    kernel(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs if group["amsgrad"] else [], steps,
           lr=float(group["lr"]), beta1=float(beta1), beta2=float(beta2), weight_decay=float(group["weight_decay"]),
           eps=float(group["eps"]), amsgrad=bool(group["amsgrad"]), maximize=bool(group["maximize"]))


def _foreach_adam(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list, max_exp_avg_sqs: list, steps: list,
                  group: dict) -> None:
    beta1, beta2 = group["betas"]
    lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
    _FOREACH_ADD_(steps, 1)
    if group["maximize"]:
        grads = _FOREACH_NEG(grads)
    if weight_decay != 0:
        if group["decoupled_weight_decay"]:
            _FOREACH_MUL_(params, 1 - lr * weight_decay)
        else:
            grads = _FOREACH_ADD(grads, params, alpha=weight_decay)
    _FOREACH_LERP_(exp_avgs, grads, 1 - beta1)
    _FOREACH_MUL_(exp_avg_sqs, beta2)
    _FOREACH_ADDCMUL_(exp_avg_sqs, grads, grads, 1 - beta2)
    counts = [s.item() for s in steps]
    step_sizes = [-lr / (1 - beta1 ** t) for t in counts]
    bias_correction2_sqrt = [math.sqrt(1 - beta2 ** t) for t in counts]
    if group["amsgrad"]:
        _FOREACH_MAXIMUM_(max_exp_avg_sqs, exp_avg_sqs)
        denom = _FOREACH_SQRT(max_exp_avg_sqs)
    else:
        denom = _FOREACH_SQRT(exp_avg_sqs)
    _FOREACH_DIV_(denom, bias_correction2_sqrt)
    _FOREACH_ADD_(denom, eps)
    _FOREACH_ADDCDIV_(params, exp_avgs, denom, step_sizes)
