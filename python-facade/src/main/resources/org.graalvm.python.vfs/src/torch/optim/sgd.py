"""torch.optim.SGD: stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay, with
PyTorch's update, one multi-tensor operator call per stage:

    g = grad (negated when maximize) + weight_decay * param
    buf = g on the first step, else momentum * buf + (1 - dampening) * g
    g = g + momentum * buf with nesterov, else buf (when momentum is not 0)
    param = param - lr * g

fused=True runs ATen's fused SGD kernel instead (the same update in one call).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .._dispatch import require
from ..autograd.grad_mode import no_grad
from .optimizer import Optimizer, group_by_device_and_dtype, is_distributed

_FOREACH_NEG = require("_foreach_neg")
_FOREACH_ADD = require("_foreach_add")
_FOREACH_ADD_ = require("_foreach_add_")
_FOREACH_MUL_ = require("_foreach_mul_")
_FUSED_SGD_ = require("_fused_sgd_")
_EMPTY_LIKE = require("empty_like")


class SGD(Optimizer):
    """SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False, foreach=None,
    differentiable=False, fused=None)"""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        if lr < 0.0:
            raise ValueError("Invalid learning rate: %s" % lr)
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: %s" % momentum)
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: %s" % weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("SGD(differentiable=True) is not supported")
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    @no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; returns the closure's loss (None without one)."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params, grads, buffers = [], [], []
            for p in group["params"]:
                grad = p.grad
                if grad is not None:
                    params.append(p)
                    grads.append(grad)
                    buffers.append(self.state[p].get("momentum_buffer"))
            if not params:
                continue
            for ps, gs, bs in group_by_device_and_dtype(params, grads, buffers).values():
                # Distributed parameters take the fused kernel: one call per device over its shards.
                updated = (_fused_sgd if group["fused"] or is_distributed(ps[0]) else _foreach_sgd)(ps, gs, bs, group)
                if group["momentum"] != 0:
                    for p, buf in zip(ps, updated):
                        self.state[p]["momentum_buffer"] = buf
        return loss


def _foreach_sgd(params: list, grads: list, buffers: list, group: dict) -> list:
    momentum, dampening, nesterov = group["momentum"], group["dampening"], group["nesterov"]
    weight_decay, lr = group["weight_decay"], group["lr"]
    if group["maximize"]:
        grads = _FOREACH_NEG(grads)
    if weight_decay != 0:
        grads = _FOREACH_ADD(grads, params, alpha=weight_decay)
    if momentum != 0:
        held = [i for i, b in enumerate(buffers) if b is not None]
        if held:
            _FOREACH_MUL_([buffers[i] for i in held], momentum)
            _FOREACH_ADD_([buffers[i] for i in held], [grads[i] for i in held], alpha=1 - dampening)
        buffers = [g.clone().detach() if b is None else b for g, b in zip(grads, buffers)]
        steps = _FOREACH_ADD(grads, buffers, alpha=momentum) if nesterov else buffers
    else:
        steps = grads
    _FOREACH_ADD_(params, steps, alpha=-lr)
    return buffers


def _empty_like(p: Any) -> Any:
    if is_distributed(p):
        import dtorch
        return dtorch.empty_like(p)
    return _EMPTY_LIKE(p)


def _fused_sgd(params: list, grads: list, buffers: list, group: dict) -> list:
    momentum = group["momentum"]
    first = False
    if momentum != 0:
        first = any(b is None for b in buffers)
        if first:
            # The kernel fills every buffer on the first step; it takes them all new or all held.
            buffers = [_empty_like(p) for p in params]
    _FUSED_SGD_(params, grads, buffers if momentum != 0 else [], weight_decay=float(group["weight_decay"]),
                momentum=float(momentum), lr=float(group["lr"]), dampening=float(group["dampening"]),
                nesterov=bool(group["nesterov"]), maximize=bool(group["maximize"]), is_first_step=first)
    return buffers
