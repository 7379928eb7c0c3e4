"""parallelize_module: applies parallel styles to a module and its submodules by name, with PyTorch's name, arguments
and plan syntax (torch.distributed.tensor.parallel.parallelize_module); parameter_layouts: where each parameter lies
afterwards, for a loader that fills the shards."""

from __future__ import annotations

import warnings
from fnmatch import fnmatch
from typing import Any, NamedTuple, Union

from torch import nn

from .._tensor import Tensor, _mesh
from ..distributed_spec import DeviceMesh, Placement
from .style import ParallelStyle

Plan = Union[ParallelStyle, "dict[str, Plan]"]

__all__ = ["parallelize_module", "parameter_layouts", "ParameterLayout"]


def _children_text(module: nn.Module) -> str:
    names = [name for name, _ in module.named_children()]
    return ", ".join(repr(n) for n in names) if names else "none"


def _resolve(module: nn.Module, plan: Any, prefix: str, out: list) -> None:
    """Appends (fully qualified name, module, style) for every entry of `plan` below `module`, in plan order, or
    raises before anything is applied: a value that is neither a style nor a plan, a key with an empty part. A key that
    reaches no module is skipped with a UserWarning naming it, as PyTorch skips it."""
    if isinstance(plan, ParallelStyle):
        out.append((prefix, module, plan))
        return
    if not isinstance(plan, dict):
        raise TypeError("parallelize_plan must be a ParallelStyle or a dict of module name -> ParallelStyle (or a "
                        "nested dict), got %r%s" % (type(plan).__name__, " at %r" % prefix if prefix else ""))
    for key, value in plan.items():
        if not isinstance(key, str):
            raise TypeError("parallelize_plan keys must be module names (str), got %r" % (key,))
        if not isinstance(value, (ParallelStyle, dict)):
            raise TypeError("parallelize_plan[%r] must be a ParallelStyle or a nested plan (dict), got %r"
                            % (key, type(value).__name__))
        full_key = prefix + "." + key if prefix and key else prefix or key
        if key == "":
            _resolve(module, value, prefix, out)
            continue
        # Each atom of the key matches child names (fnmatch: *, ?, [seq]); a wildcard may select children of which
        # only some have the next atom. A key that reaches no module at all is skipped with a warning.
        atoms = key.split(".")
        if "" in atoms:
            raise ValueError("parallelize_plan key %r has an empty part" % (full_key,))
        frontier = [(prefix, module)]
        for atom in atoms:
            matched = [(name_of(fqn, child_name), child) for fqn, parent in frontier
                       for child_name, child in parent.named_children() if fnmatch(child_name, atom)]
            if not matched:
                parents = " or ".join("%s (children: %s)" % (repr(fqn) if fqn else "the root module", _children_text(m))
                                      for fqn, m in frontier[:3])
                warnings.warn("parallelize_plan key %r matches no submodule: no child of %s%s matches %r; skipping this "
                              "plan entry" % (full_key, parents, " ..." if len(frontier) > 3 else "", atom), stacklevel=3)
            frontier = matched
        for fqn, child in frontier:
            _resolve(child, value, fqn, out)


def name_of(prefix: str, name: str) -> str:
    return prefix + "." + name if prefix else name


def _check(entries: list) -> None:
    """Every style accepts its module, and no module is distributed twice."""
    distributed: dict[int, str] = {}
    for fqn, module, style in entries:
        where = repr(fqn) if fqn else "the root module"
        try:
            style._check(module)
        except NotImplementedError as e:
            raise NotImplementedError("%s (at %s)" % (e, where)) from None
        if style._distributes:
            if getattr(module, "_distribute_module_applied", False):
                raise RuntimeError("%s at %s: the module is distributed already (distribute_module or a parallel style "
                                   "ran on it); a module is distributed once" % (type(style).__name__, where))
            if id(module) in distributed:
                raise ValueError("parallelize_plan gives %s two styles that distribute it (the second: %s at %s); a "
                                 "module is distributed once" % (distributed[id(module)], type(style).__name__, where))
            distributed[id(module)] = where


def parallelize_module(module: nn.Module, device_mesh: DeviceMesh | None = None, parallelize_plan: Plan | None = None,
                       *, src_data_rank: int | None = 0) -> nn.Module:
    """Applies `parallelize_plan` to `module` on `device_mesh` (the runtime's whole mesh if None) and returns the module.

    The plan is a ParallelStyle, applied to `module` itself, or a dict from submodule names to styles (or to nested
    plans, applied below that submodule): "attention.wq", "layers.*.feed_forward.w1" (each dotted part matched against
    child names with fnmatch), "" for `module` itself. Entries apply in the dict's order. Every key must reach at least
    one module, every style must accept its module's type, and no module may get two styles that distribute it: each
    is checked before anything changes, so a refused plan leaves the module as it was.

    A mesh of several dimensions is taken whole: each style applies along the dimension named "tp", else the last,
    and parameters are replicated on the others. src_data_rank is accepted for PyTorch's signature and changes
    nothing: the controller holds every value."""
    if not isinstance(module, nn.Module):
        raise TypeError("parallelize_module() takes a torch.nn.Module, got %r" % (type(module).__name__,))
    mesh = _mesh(device_mesh)
    if src_data_rank is not None and (isinstance(src_data_rank, bool) or not isinstance(src_data_rank, int)):
        raise TypeError("src_data_rank must be an int or None, got %r" % (src_data_rank,))
    if parallelize_plan is None:
        warnings.warn("parallelize_module: no parallelize_plan given, so the module is left as it is", stacklevel=2)
        return module
    entries: list = []
    _resolve(module, parallelize_plan, "", entries)
    _check(entries)
    for _fqn, submodule, style in entries:
        style.src_data_rank = src_data_rank
        style._apply(submodule, mesh)
    return module


class ParameterLayout(NamedTuple):
    """Where a parameter or buffer lies: its mesh and placements (None and () for a torch.Tensor on the controller)."""

    device_mesh: DeviceMesh | None
    placements: tuple[Placement, ...]


def parameter_layouts(module: nn.Module, include_buffers: bool = False) -> dict[str, ParameterLayout]:
    """{fully qualified name: (device_mesh, placements)} for every parameter of `module` (and its buffers with
    include_buffers), in named_parameters order: what a checkpoint loader needs to read each device's part of each
    tensor, after parallelize_module or distribute_module. A parameter that is still a torch.Tensor gives (None, ())."""
    if not isinstance(module, nn.Module):
        raise TypeError("parameter_layouts() takes a torch.nn.Module, got %r" % (type(module).__name__,))
    items = list(module.named_parameters())
    if include_buffers:
        items += list(module.named_buffers())
    layouts = {}
    for fqn, value in items:
        if isinstance(value, Tensor):
            layouts[fqn] = ParameterLayout(value.device_mesh, tuple(value.placements))
        else:
            layouts[fqn] = ParameterLayout(None, ())
    return layouts
