"""distribute_module: a torch.nn.Module's parameters and buffers onto a device mesh, and hooks that prepare its inputs and
outputs, with PyTorch DTensor's name, arguments and call signatures.

    import dtorch, torch
    mesh = dtorch.init_device_mesh("cpu", (4,))
    model = dtorch.distribute_module(torch.nn.Linear(8, 8), mesh)   # every parameter replicated
    y = model(dtorch.distribute_tensor(x, mesh, [dtorch.Replicate()]))

A parameter becomes nn.Parameter(dtorch.Tensor): the controller holds the whole value, so distributing it copies each
device's shard from it (nothing is broadcast from a rank, as PyTorch's src_data_rank would)."""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Sequence

import torch as _torch

from ._tensor import Tensor, _mesh, distribute_tensor
from .distributed_spec import DeviceMesh, Placement, Replicate, _specs


def _module_types():
    from torch import nn
    return nn.Module, nn.Parameter


def same_placements(a: Sequence[Placement], b: Sequence[Placement], ndim: int) -> bool:
    """Whether two placement lists say the same for a tensor of `ndim` dimensions (Shard(-1) is Shard(ndim - 1))."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if not x == y:  # equal placements say the same for any ndim; others may, once a negative dimension is read
            return _specs(list(a), ndim) == _specs(list(b), ndim)
    return True


def distributed_parameter(param: Any, mesh: DeviceMesh, placements: Sequence[Placement]) -> Any:
    """nn.Parameter of `param` laid out as `placements` on `mesh`, keeping its requires_grad flag: a torch.Tensor is
    distributed (each device copies its shard); a dtorch.Tensor is redistributed unless it lies that way already."""
    _, parameter = _module_types()
    requires_grad = getattr(param, "requires_grad", True)
    if isinstance(param, Tensor):
        value = param
        if not (param.device_mesh == mesh and same_placements(param.placements, placements, param.ndim)):
            value = param.redistribute(mesh, placements)
    elif isinstance(param, _torch.Tensor):
        value = distribute_tensor(param, mesh, list(placements))
    else:
        raise TypeError("a parameter must be a torch.Tensor or a dtorch.Tensor, got %r" % (type(param).__name__,))
    if isinstance(value, parameter) and value is param:
        return param
    return parameter(value, requires_grad=requires_grad)


def _replicate_rest(module: Any, mesh: DeviceMesh) -> None:
    """Replicates this module's own parameters and buffers that are not distributed yet (those partition_fn left)."""
    replicate = [Replicate()] * mesh.ndim
    for name, param in list(module._parameters.items()):
        if param is not None and not isinstance(param, Tensor):
            module.register_parameter(name, distributed_parameter(param, mesh, replicate))
    for name, buf in list(module._buffers.items()):
        if buf is not None and not isinstance(buf, Tensor):
            module._buffers[name] = distribute_tensor(buf, mesh, replicate)


def _arity(fn: Callable[..., Any], what: str) -> int:
    """How many arguments fn takes (2: the deprecated (inputs, device_mesh); 3: (module, inputs, device_mesh))."""
    if not callable(fn):
        raise TypeError("%s must be callable, got %r" % (what, fn))
    n = len(inspect.signature(fn).parameters)
    if n not in (2, 3):
        raise ValueError("%s should take 3 arguments (module, %s, device_mesh), but it takes %d"
                         % (what, "inputs" if what == "input_fn" else "outputs", n))
    return n


def distribute_module(module: Any, device_mesh: DeviceMesh | None = None,
                      partition_fn: Callable[[str, Any, DeviceMesh], None] | None = None,
                      input_fn: Callable[..., Any] | None = None,
                      output_fn: Callable[..., Any] | None = None) -> Any:
    """Distributes `module` on `device_mesh` (the runtime's whole mesh if None) and returns it.

    partition_fn(name, submodule, device_mesh) runs for the module and every submodule (named_modules order) and may
    register distributed parameters (nn.Parameter(dtorch.distribute_tensor(...))); whatever parameter or buffer is still
    a torch.Tensor afterwards is replicated on every mesh dimension. Without partition_fn everything is replicated.
    input_fn(module, inputs, device_mesh) becomes a forward pre-hook (its result replaces the positional inputs, a
    single value as a 1-tuple) and output_fn(module, outputs, device_mesh) a forward hook (its result replaces the
    output); the two-argument forms (inputs, device_mesh) and (outputs, device_mesh) still work with a FutureWarning.
    A function of another arity is a ValueError, raised before anything changes. A module distributes once: a second
    call is a RuntimeError."""
    module_type, _ = _module_types()
    if not isinstance(module, module_type):
        raise TypeError("distribute_module() takes a torch.nn.Module, got %r" % (type(module).__name__,))
    if getattr(module, "_distribute_module_applied", False):
        raise RuntimeError("distribute_module should only be called once on a module, but it has already been called "
                           "on this %s" % type(module).__name__)
    mesh = _mesh(device_mesh)
    input_arity = _arity(input_fn, "input_fn") if input_fn is not None else 0
    output_arity = _arity(output_fn, "output_fn") if output_fn is not None else 0
    if partition_fn is not None and not callable(partition_fn):
        raise TypeError("partition_fn must be callable, got %r" % (partition_fn,))

    for name, submodule in list(module.named_modules()):
        if partition_fn is not None:
            partition_fn(name, submodule, mesh)
        _replicate_rest(submodule, mesh)

    if input_fn is not None:
        if input_arity == 2:
            warnings.warn("input_fn taking (inputs, device_mesh) is deprecated; take (module, inputs, device_mesh)",
                          FutureWarning, stacklevel=2)
            module.register_forward_pre_hook(lambda _mod, inputs: input_fn(inputs, mesh))
        else:
            module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, mesh))
    if output_fn is not None:
        if output_arity == 2:
            warnings.warn("output_fn taking (outputs, device_mesh) is deprecated; take (module, outputs, device_mesh)",
                          FutureWarning, stacklevel=2)
            module.register_forward_hook(lambda _mod, _inputs, outputs: output_fn(outputs, mesh))
        else:
            module.register_forward_hook(lambda mod, _inputs, outputs: output_fn(mod, outputs, mesh))
    module._distribute_module_applied = True
    return module


__all__ = ["distribute_module"]
