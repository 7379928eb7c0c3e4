"""Where a parallel style's placement goes on a mesh, and how a style's input or output gets there.

A style names one placement (Shard(0), Replicate(), ...), as PyTorch's styles do for their 1-D mesh. On a mesh of
several dimensions it applies along the tensor-parallel dimension: the one named "tp", else the last. The other
dimensions keep what the tensor has (a batch sharded over "dp" stays so); a tensor that comes in as a torch.Tensor,
or from another mesh, is replicated on them."""

from __future__ import annotations

from typing import Any

import torch as _torch

from .._distribute_module import same_placements
from .._tensor import Tensor, distribute_tensor
from ..distributed_spec import DeviceMesh, Placement, Replicate

TP_DIM_NAME = "tp"


def tp_dim(mesh: DeviceMesh) -> int:
    """The mesh dimension a style applies along: the one named "tp", else the last."""
    try:
        return mesh._tp_dim  # a mesh never changes, and its styles ask on every module call
    except AttributeError:
        pass
    names = mesh.mesh_dim_names
    found = names.index(TP_DIM_NAME) if names and TP_DIM_NAME in names else mesh.ndim - 1
    mesh._tp_dim = found
    return found


def along(mesh: DeviceMesh, placement: Placement, base: Any = None) -> list[Placement]:
    """`placement` on the tensor-parallel dimension of `mesh`, the others as in `base` (Replicate if None)."""
    placements = list(base) if base is not None else [Replicate()] * mesh.ndim
    placements[tp_dim(mesh)] = placement
    return placements


def tp_placement(tensor: Tensor, mesh: DeviceMesh) -> Placement:
    """The placement of `tensor` along the tensor-parallel dimension of `mesh`."""
    return tensor.placements[tp_dim(mesh)]


def annotate(value: Any, mesh: DeviceMesh, placement: Placement, what: str) -> Tensor:
    """A style's input or output as a distributed tensor: a dtorch.Tensor as it is; a torch.Tensor is the global value
    (there is no per-rank program whose local part it could be), laid out as `placement` along the tensor-parallel
    dimension and replicated on the others."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, _torch.Tensor):
        return distribute_tensor(value, mesh, along(mesh, placement))
    raise TypeError("%s: expected a torch.Tensor or a dtorch.Tensor, got %r" % (what, type(value).__name__))


def move(tensor: Tensor, mesh: DeviceMesh, placement: Placement) -> Tensor:
    """`tensor` with `placement` along the tensor-parallel dimension of `mesh`, its other dimensions kept (a tensor of
    another mesh comes onto `mesh`, replicated on them); itself when it lies so already."""
    if tensor.device_mesh == mesh:
        current = tensor.placements
        target = along(mesh, placement, current)
        if same_placements(current, target, tensor.ndim):
            return tensor
    else:
        target = along(mesh, placement)
    return tensor.redistribute(mesh, target)
