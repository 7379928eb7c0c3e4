"""Tensors from Python values and the factories: tensor, zeros, ones, empty, full, rand, randn, arange, ... Those that
are ATen operators go through the dispatcher like any other; these wrappers check the device first, so that CUDA
where it is missing fails with the reason and the fix."""

from __future__ import annotations

import builtins
import numbers
from typing import TYPE_CHECKING, Any

from . import _dispatch, _interop, _types
from ._interop import INT64_MAX, INT64_MIN
from ._dispatch import require
from ._nested import flatten

if TYPE_CHECKING:
    from ._tensor import Tensor


def _check_device(kwargs):
    device = kwargs.get("device")
    if device is not None:
        kwargs["device"] = str(device) if isinstance(device, _types.device) else device
        _interop.call(_dispatch.JAVA.requireDevice, str(device))
    return kwargs


def _requiring_grad(t, requires_grad):
    """t, made a leaf that autograd tracks where requires_grad (the factories' argument is not the operators')."""
    if requires_grad:
        t.requires_grad_(True)
    return t


def _factory(name):
    op = require(name)

    def factory(*args, **kwargs):
        requires_grad = kwargs.pop("requires_grad", False)
        return _requiring_grad(op.call(args, _check_device(kwargs)), requires_grad)

    factory.__name__ = name
    return factory


zeros = _factory("zeros")
ones = _factory("ones")
empty = _factory("empty")
full = _factory("full")
rand = _factory("rand")
randn = _factory("randn")
randint = _factory("randint")
randperm = _factory("randperm")
arange = _factory("arange")
linspace = _factory("linspace")
eye = _factory("eye")
zeros_like = _factory("zeros_like")
ones_like = _factory("ones_like")
empty_like = _factory("empty_like")
full_like = _factory("full_like")
rand_like = _factory("rand_like")
randn_like = _factory("randn_like")


def tensor(data: Any, dtype: _types.dtype | None = None, device: _types.device | str | None = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A tensor made from nested lists or tuples of numbers, a number, or a tensor (copied)."""
    from ._tensor import Tensor
    if isinstance(data, Tensor):
        # A copy that shares no history with data (PyTorch's torch.tensor(t) is t.clone().detach()).
        copied = data.detach().to(dtype=dtype, device=device, copy=True) if (dtype or device) else data.detach().clone()
        return _requiring_grad(copied, requires_grad)
    flat, shape = flatten(data)
    for i, v in enumerate(flat):
        if isinstance(v, Tensor):
            flat[i] = v.item()
        elif not isinstance(v, numbers.Number):
            raise TypeError("tensor(): the values must be numbers, got %r" % (v,))
    all_bool = builtins.all(type(v) is builtins.bool for v in flat)
    all_int = builtins.all(isinstance(v, numbers.Integral) for v in flat)
    if dtype is None:
        dtype = _types.bool if all_bool and flat else _types.int64 if all_int and flat else _types.float32
    for v in flat:
        if isinstance(v, numbers.Integral) and not INT64_MIN <= v <= INT64_MAX:
            raise OverflowError("tensor(): the value %d does not fit in int64" % v)
    integral = all_int and not dtype.is_floating_point and not dtype.is_complex
    if not integral:
        flat = [builtins.float(v) for v in flat]
    device = "cpu" if device is None else str(device)
    java = _interop.call(_dispatch.JAVA.fromValues, flat, shape, integral, dtype.name, device)
    return _requiring_grad(_dispatch.make_tensor(java), requires_grad)


def as_tensor(data: Any, dtype: _types.dtype | None = None, device: _types.device | str | None = None) -> Tensor:
    from ._tensor import Tensor
    if isinstance(data, Tensor) and dtype is None and device is None:
        return data
    return tensor(data, dtype=dtype, device=device)


def scalar_tensor(value: bool | int | float, dtype: _types.dtype | None = None,
                  device: _types.device | str | None = None) -> Tensor:
    return tensor(value, dtype=dtype or _types.float32, device=device)
