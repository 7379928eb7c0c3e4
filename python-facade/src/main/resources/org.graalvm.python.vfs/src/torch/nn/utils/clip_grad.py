"""Gradient clipping over the gradients of torch tensors, with ATen's multi-tensor operators: the norms of all the
gradients in one call per device and dtype, the scaling in one more. Over distributed gradients (dtorch.Tensor) the
squares of every shard are summed on each device, one reduction makes the total, and each device scales its own
shards."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterable

from ..._dispatch import require
from ..._factories import tensor
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad

_FOREACH_NORM = require("_foreach_norm")
_FOREACH_MUL_ = require("_foreach_mul_")
_FOREACH_CLAMP_MIN_ = require("_foreach_clamp_min_")
_FOREACH_CLAMP_MAX_ = require("_foreach_clamp_max_")
_VECTOR_NORM = require("linalg_vector_norm")
_STACK = require("stack")
_CLAMP = require("clamp")
_DIV = require("div")
_FULL_LIKE = require("full_like")


def _gradients(parameters: Any) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [g for g in (p.grad for p in parameters) if g is not None]


def _by_device_and_dtype(grads: list) -> OrderedDict:
    grouped: OrderedDict = OrderedDict()
    for g in grads:
        grouped.setdefault((str(g.device), g.dtype), []).append(g)
    return grouped


@no_grad()
def clip_grad_norm_(parameters: Iterable[Any] | Tensor, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scales the gradients of `parameters` in place so that their total norm (the norm of the vector of every
    gradient's norm, of order norm_type; inf for the largest magnitude) is at most max_norm, and returns the total norm
    before scaling. Gradients under the bound are left as they are (the scale is clamped at 1)."""
    grads = _gradients(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not grads:
        return tensor(0.0)
    from ..parameter import is_distributed
    if any(is_distributed(g) for g in grads):
        return _clip_distributed(grads, max_norm, norm_type, error_if_nonfinite)
    groups = _by_device_and_dtype(grads)
    first_device = str(grads[0].device)
    norms = []
    for group in groups.values():
        norms.extend(n.to(device=first_device) for n in _FOREACH_NORM(group, norm_type))
    total_norm = _VECTOR_NORM(_STACK(norms), norm_type)
    if error_if_nonfinite and not math.isfinite(total_norm.item()):
        raise RuntimeError("The total norm of order %s for gradients from `parameters` is non-finite, so it cannot be "
                           "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`" % norm_type)
    scale = _CLAMP(_DIV(_FULL_LIKE(total_norm, max_norm), total_norm + 1e-6), max=1.0)
    for (device, _), group in groups.items():
        _FOREACH_MUL_(group, scale.to(device=device))
    return total_norm


def _clip_distributed(grads: list, max_norm: float, norm_type: float, error_if_nonfinite: bool) -> Any:
    """clip_grad_norm_ of distributed gradients on one mesh, as torch takes it: the norm of order p of the gradients'
    norms. A finite p > 0: every gradient's sum of |g|^p (a partial sum where it is sharded), added up on each device,
    made whole by one reduction, then the p-th root. inf / -inf: the largest / smallest magnitude of each gradient,
    made whole, then of them all; 0: how many gradients have a non-zero element."""
    from ..parameter import is_distributed
    if not all(is_distributed(g) for g in grads) or len({repr(g.device_mesh) for g in grads}) != 1:
        raise ValueError("clip_grad_norm_: the gradients must all be distributed tensors on one mesh")
    from dtorch import Replicate
    mesh = grads[0].device_mesh
    whole = [Replicate()] * mesh.ndim
    if norm_type == 0.0:
        counts = [(g != 0).sum().redistribute(mesh, whole) for g in grads]
        total_norm = counts[0].ne(0).to(grads[0].dtype)
        for c in counts[1:]:
            total_norm = total_norm + c.ne(0).to(grads[0].dtype)
    elif math.isinf(norm_type):
        extremes = [(g.abs().amax() if norm_type > 0 else g.abs().amin()).redistribute(mesh, whole) for g in grads]
        total_norm = extremes[0]
        for e in extremes[1:]:
            total_norm = total_norm.maximum(e) if norm_type > 0 else total_norm.minimum(e)
    else:
        total = None
        for g in grads:
            if norm_type == 2.0:
                part = (g * g).sum()
            else:
                part = g.abs().pow(norm_type).sum()
            total = part if total is None else total + part
        total = total.redistribute(mesh, whole)
        total_norm = total if norm_type == 1.0 else (total.sqrt() if norm_type == 2.0 else total.pow(1.0 / norm_type))
    if error_if_nonfinite and not math.isfinite(total_norm.item()):
        raise RuntimeError("The total norm of order %s for gradients from `parameters` is non-finite, so it cannot be "
                           "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`" % norm_type)
    scale = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for group in _by_mesh_and_dtype(grads).values():
        _FOREACH_MUL_(group, scale)
    return total_norm


def _by_mesh_and_dtype(grads: list) -> OrderedDict:
    grouped: OrderedDict = OrderedDict()
    for g in grads:
        grouped.setdefault(g.dtype, []).append(g)
    return grouped


@no_grad()
def clip_grad_value_(parameters: Iterable[Any] | Tensor, clip_value: float, foreach: bool | None = None) -> None:
    """Clamps every gradient of `parameters` into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    for group in _by_device_and_dtype(_gradients(parameters)).values():
        _FOREACH_CLAMP_MIN_(group, -clip_value)
        _FOREACH_CLAMP_MAX_(group, clip_value)
