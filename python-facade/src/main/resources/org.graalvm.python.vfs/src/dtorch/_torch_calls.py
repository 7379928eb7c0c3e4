"""torch's functions on distributed tensors: what dtorch.Tensor.__torch_function__ runs when a torch.* or
torch.nn.functional.* call gets a dtorch.Tensor, as PyTorch lets DTensor take over torch calls.

An ATen operator (torch.matmul, torch.cat, F.linear, F.silu, and the operators torch.nn.functional's wrappers call with
converted arguments) runs through the generic path, dtorch.aten, with the same arguments; the operators and functions
that dtorch writes by hand (dropout, whose mask must agree across devices) run dtorch's own. A torch.Tensor among the
arguments is refused as PyTorch's DTensor refuses it, unless it is 0-dimensional: such a scalar tensor is replicated
on the mesh of the call's distributed tensors."""

from __future__ import annotations

from typing import Any, Callable

import torch as _torch
from torch import _dispatch

from . import _tensor
from .distributed_spec import Replicate


def _dropout_operator(input, p, train):
    from .nn import functional
    return functional.dropout(input, p, train)


# ATen operators whose distributed form is dtorch's own function, by name.
_OPERATORS: dict[str, Callable[..., Any]] = {"dropout": _dropout_operator}

# torch.nn.functional's Python functions that hand a distributed tensor to dtorch.nn.functional's function of the name.
_FUNCTIONAL = frozenset(("dropout",))


def _mesh(values):
    for v in values:
        if isinstance(v, _tensor.Tensor):
            return v.device_mesh
        if isinstance(v, (list, tuple)):
            found = _mesh(v)
            if found is not None:
                return found
    return None


def _distributed(name, value, mesh):
    """`value` as the call's argument: a 0-dimensional torch.Tensor replicated on `mesh`; any other torch.Tensor
    refused, as PyTorch's DTensor refuses it."""
    if isinstance(value, _torch.Tensor):
        if value.ndim == 0:
            return _tensor.distribute_tensor(value, mesh, [Replicate()] * mesh.ndim)
        raise RuntimeError("%s: got mixed torch.Tensor and dtorch.Tensor; distribute the torch.Tensor of shape %s first "
                           "(dtorch.distribute_tensor(t, device_mesh, placements))" % (name, tuple(value.shape)))
    if isinstance(value, (list, tuple)) and any(isinstance(v, _torch.Tensor) for v in value):
        return type(value)(_distributed(name, v, mesh) for v in value)
    return value


def _has_local(values):
    """Whether a torch.Tensor is among `values` (or in a list or tuple among them): only then is the mesh read."""
    for v in values:
        if isinstance(v, _torch.Tensor) or isinstance(v, (list, tuple)) and _has_local(v):
            return True
    return False


def torch_function(func: Any, args: tuple, kwargs: dict) -> Any:
    """Runs the torch function or operator `func` on arguments among which are distributed tensors."""
    name = getattr(func, "__name__", str(func))
    if isinstance(func, _dispatch.Op):
        if _has_local(args) or _has_local(kwargs.values()):
            mesh = _mesh(list(args) + list(kwargs.values()))
            args = tuple(_distributed("aten." + name, a, mesh) for a in args)
            kwargs = {k: _distributed("aten." + name, v, mesh) for k, v in kwargs.items()}
        own = _OPERATORS.get(name)
        if own is not None:
            return own(*args, **kwargs)
        return _tensor.aten(name, args, kwargs)
    if getattr(func, "__module__", None) == "torch.nn.functional" and name in _FUNCTIONAL:
        from .nn import functional
        return getattr(functional, name)(*args, **kwargs)
    return NotImplemented
