"""Tensor.to(...) of distributed tensors with torch's signature: to(dtype), to(device), to(device, dtype), to(other),
and the keywords dtype=, device=, non_blocking=, copy=, memory_format=.

A distributed tensor lives on the devices of its mesh, so a device argument names the mesh's device kind ("cpu" or
"cuda", any index: each device of the mesh holds its own shard); another kind is refused, since the runtime's meshes
all have its one device type. non_blocking is accepted and changes nothing: every operator is asynchronous already. memory_format takes
torch.preserve_format and torch.contiguous_format (which copies each shard in row-major order).
"""

from __future__ import annotations

from typing import Any

import torch as _torch
from torch import _types

from . import _dtypes

_SIGNATURES = ("to(dtype, non_blocking=False, copy=False, memory_format=torch.preserve_format), "
               "to(device=None, dtype=None, non_blocking=False, copy=False, memory_format=torch.preserve_format), "
               "to(other, non_blocking=False, copy=False)")


def _device(value: Any) -> _types.device:
    if isinstance(value, int) and not isinstance(value, bool):
        return _types.device("cuda", value)  # torch reads a bare index as a CUDA device
    if isinstance(value, (str, _types.device)):
        return _types.device(value)
    raise TypeError("to(): expected a device, got %r; the signatures are %s" % (value, _SIGNATURES))


def _parse(args: tuple, kwargs: dict) -> tuple:
    """(dtype or None, device or None, copy, memory_format) from torch's overloads of to()."""
    from ._tensor import Tensor
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    non_blocking = kwargs.pop("non_blocking", False)
    copy = kwargs.pop("copy", False)
    memory_format = kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError("to() got an unexpected keyword argument %r; the signatures are %s" % (next(iter(kwargs)), _SIGNATURES))
    rest = list(args)
    if rest and isinstance(rest[0], (Tensor, _torch.Tensor)):
        other = rest.pop(0)
        if dtype is not None or device is not None:
            raise TypeError("to(other) takes no dtype= or device=; the signatures are %s" % (_SIGNATURES,))
        dtype = other.dtype
        device = other.device_mesh.device_type if isinstance(other, Tensor) else other.device
    elif rest and (isinstance(rest[0], _types.dtype) or isinstance(rest[0], str) and rest[0] in _types.DTYPES):
        if dtype is not None:
            raise TypeError("to(): dtype given twice; the signatures are %s" % (_SIGNATURES,))
        dtype = rest.pop(0)
    elif rest and rest[0] is not None and not isinstance(rest[0], bool):
        if device is not None:
            raise TypeError("to(): device given twice; the signatures are %s" % (_SIGNATURES,))
        device = rest.pop(0)
        if rest and (isinstance(rest[0], _types.dtype) or isinstance(rest[0], str) and rest[0] in _types.DTYPES):
            if dtype is not None:
                raise TypeError("to(): dtype given twice; the signatures are %s" % (_SIGNATURES,))
            dtype = rest.pop(0)
    elif rest and rest[0] is None:
        rest.pop(0)  # to(None, dtype): torch's device=None positionally
        if rest and isinstance(rest[0], _types.dtype):
            dtype = rest.pop(0)
    # torch also takes non_blocking and copy positionally after the dtype or device
    for name in ("non_blocking", "copy"):
        if rest and isinstance(rest[0], bool):
            if name == "non_blocking":
                non_blocking = rest.pop(0)
            else:
                copy = rest.pop(0)
    if rest:
        raise TypeError("to() received an invalid combination of arguments %r; the signatures are %s" % (tuple(args), _SIGNATURES))
    if not isinstance(non_blocking, bool) or not isinstance(copy, bool):
        raise TypeError("to(): non_blocking and copy must be bools, got %r and %r" % (non_blocking, copy))
    if memory_format is not None and not isinstance(memory_format, _types.memory_format):
        raise TypeError("to(): memory_format must be a torch.memory_format, got %r" % (memory_format,))
    return (None if dtype is None else _dtypes.of(dtype)), (None if device is None else _device(device)), copy, memory_format


def convert(t: Any, args: tuple, kwargs: dict) -> Any:
    """t.to(*args, **kwargs): `t` itself when nothing changes (unless copy=True), else a new distributed tensor."""
    dtype, device, copy, memory_format = _parse(args, kwargs)
    if device is not None:
        kind = t.device_mesh.device_type
        if device.type != kind:
            raise RuntimeError("to(%s): a distributed tensor stays on the devices of its mesh (%s); the runtime's meshes are all "
                               "%s devices, so it cannot move to %s" % (device, kind, kind, device.type))
    if memory_format is not None and memory_format.name not in ("preserve_format", "contiguous_format"):
        raise RuntimeError("to(memory_format=%r): distributed tensors are strided in their shards' natural order; only "
                           "torch.preserve_format and torch.contiguous_format are supported" % (memory_format,))
    out = t
    if dtype is not None and dtype != t.dtype:
        from ._tensor import Tensor, _b
        from . import _bridge
        out = Tensor(_bridge.call(_b().to, t._java, dtype.name))
    if memory_format is not None and memory_format.name == "contiguous_format":
        # each device's shard copied in row-major order; the runtime does not track shard strides, so this always copies
        out = out.clone(memory_format=_types.contiguous_format)
    if copy and out is t:
        out = t.clone()
    return out
