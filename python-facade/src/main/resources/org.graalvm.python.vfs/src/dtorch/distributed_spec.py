"""Device meshes and placements, as in PyTorch DTensor and DTorch."""

from __future__ import annotations

import numbers
from typing import Any, Sequence

from torch import _nested

from . import _bridge


def _is_int(value):
    return type(value) is int or isinstance(value, numbers.Integral) and not isinstance(value, bool)


class Placement:
    """How a tensor lies along one mesh dimension."""

    def _spec(self):
        raise NotImplementedError

    def __eq__(self, other):
        # The exact classes first: the parallel styles compare placements on every module call, and printing them
        # to compare costs more than the comparison.
        mine = type(self)
        if type(other) is mine:
            if mine is Replicate:
                return True
            if mine is Shard:
                return other.dim == self.dim
        return isinstance(other, Placement) and other._spec() == self._spec()

    def __hash__(self):
        return hash(self._spec())

    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self) -> bool:
        return False


class Shard(Placement):
    """S(dim): tensor dimension `dim` is split over the mesh dimension (balanced split). A negative `dim` counts from
    the end, as in PyTorch: it becomes the dimension it names when it meets a tensor."""

    def __init__(self, dim: int) -> None:
        if not _is_int(dim):
            raise TypeError("Shard(dim) needs an integer dimension, got %r" % (dim,))
        self.dim = int(dim)

    def _spec(self):
        return "S(%d)" % self.dim

    def __repr__(self):
        return "Shard(dim=%d)" % self.dim

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim


class Replicate(Placement):
    """R: every device along the mesh dimension holds the whole tensor."""

    def _spec(self):
        return "R"

    def __repr__(self):
        return "Replicate()"

    def is_replicate(self) -> bool:
        return True


class Partial(Placement):
    """P(op): every device holds a partial value; the tensor is their reduction with `reduce_op`."""

    def __init__(self, reduce_op: str = "sum") -> None:
        if reduce_op not in ("sum", "avg", "max", "min", "product"):
            raise ValueError("Partial(reduce_op) takes sum, avg, max, min or product, got %r" % (reduce_op,))
        self.reduce_op = reduce_op

    def _spec(self):
        return "P(%s)" % self.reduce_op

    def __repr__(self):
        return "Partial(%s)" % self.reduce_op

    def is_partial(self) -> bool:
        return True


def _placement(spec):
    if spec == "R":
        return Replicate()
    if spec.startswith("S("):
        return Shard(int(spec[2:-1]))
    return Partial(spec[2:-1])


# Placements by their printed forms joined with commas ("S(0),R"), as the runtime describes a tensor: parsed once each.
_PLACEMENTS: dict[str, tuple[Placement, ...]] = {}


def _placements_of(joined):
    """The placements of a tensor from their printed forms joined with commas."""
    found = _PLACEMENTS.get(joined)
    if found is None:
        found = tuple(_placement(p) for p in joined.split(",")) if joined else ()
        if len(_PLACEMENTS) < 1024:
            _PLACEMENTS[joined] = found
    return found


def _specs(placements, ndim):
    """The placements' printed forms for a tensor of `ndim` dimensions, a negative Shard dimension made non-negative."""
    if placements is None:
        return []
    if isinstance(placements, Placement):
        raise TypeError("placements must be a sequence of placements, got the single %r; write [%r]" % (placements, placements))
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError("placements must be Shard, Replicate or Partial, got %r" % (p,))
        if isinstance(p, Shard) and p.dim < 0:
            if not -ndim <= p.dim:
                raise ValueError("%r is out of range for a tensor of %d dimensions (expected a dim in [%d, %d])"
                                 % (p, ndim, -ndim, ndim - 1))
            p = Shard(p.dim + ndim)
        out.append(p._spec())
    return out


def _shape_and_ids(mesh):
    """Shape and row-major ids of a nested list (or a flat one). Ids are ints: a float or a bool is refused, never
    truncated."""
    shape = []
    level = mesh
    while isinstance(level, (list, tuple)):
        shape.append(len(level))
        level = level[0] if level else None
    ids = []

    def walk(node, depth):
        if depth == len(shape):
            if isinstance(node, (list, tuple)):
                raise ValueError("the mesh %r is not a rectangular array" % (mesh,))
            if not _is_int(node):
                raise TypeError("mesh device ids must be integers, got %r in %r" % (node, mesh))
            ids.append(int(node))
            return
        if not isinstance(node, (list, tuple)) or len(node) != shape[depth]:
            raise ValueError("the mesh %r is not a rectangular array" % (mesh,))
        for child in node:
            walk(child, depth + 1)

    walk(mesh, 0)
    return shape, ids


def _dim_names(mesh_dim_names):
    """The names as a list of strings: a single string is refused (it would split into letters)."""
    if mesh_dim_names is None:
        return []
    if isinstance(mesh_dim_names, str) or not isinstance(mesh_dim_names, (tuple, list)):
        raise TypeError("mesh_dim_names must be a tuple or list of strings, got %r; write (%r,) for one name"
                        % (mesh_dim_names, mesh_dim_names))
    for name in mesh_dim_names:
        if not isinstance(name, str):
            raise TypeError("mesh_dim_names must be strings, got %r in %r" % (name, mesh_dim_names))
    return list(mesh_dim_names)


class DeviceMesh:
    """An n-dimensional array of device ids: DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=["dp", "tp"]).

    The ids are the runtime's logical devices 0..n-1, of the runtime's device type ("cpu" or "cuda"; "cuda" on a CPU
    runtime is a ValueError naming the launcher flag that starts a CUDA one). On a CUDA runtime a "cpu" mesh over the
    same ids is the host memory of those workers: tensors are made there and moved between it and a "cuda" mesh with
    redistribute() or copy_(); other operators on it are refused with what to do instead. On a CUDA runtime with --same-device, where every
    logical device runs on cuda:0, a mesh may instead repeat 0 for every rank: DeviceMesh("cuda", [[0, 0], [0, 0]]) is
    four ranks on that GPU, the logical devices [[0, 1], [2, 3]] (which .mesh and repr show).
    """

    def __init__(self, device_type: str, mesh: Any, mesh_dim_names: Sequence[str] | None = None, _java: Any = None) -> None:
        if _java is not None:
            self._java = _java
            self.device_type = device_type
            return
        shape, ids = _shape_and_ids(mesh)
        names = _dim_names(mesh_dim_names)
        self.device_type = device_type
        self._java = _bridge.call(_bridge.bridge().mesh, device_type, shape, ids, names)

    @staticmethod
    def _wrap(java_mesh, device_type=None):
        """The DeviceMesh of a Java mesh: the last one wrapped again when it is the same Java mesh (a model's tensors
        share one or two meshes), so that what it read of the mesh is read once."""
        last = _LAST_WRAPPED[0]
        if last is not None and last._java is java_mesh:
            return last
        if device_type is None:
            device_type = _bridge.bridge().meshDeviceType(java_mesh)
        mesh = DeviceMesh(device_type, None, _java=java_mesh)
        _LAST_WRAPPED[0] = mesh
        return mesh

    # A Java mesh never changes: its shape and names are read once, on first use.
    @property
    def shape(self) -> tuple[int, ...]:
        try:
            return self._shape
        except AttributeError:
            self._shape = tuple(_bridge.bridge().meshShape(self._java))
            return self._shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def mesh_dim_names(self) -> tuple[str, ...] | None:
        try:
            return self._names
        except AttributeError:
            names = list(_bridge.bridge().meshDimNames(self._java))
            self._names = tuple(names) if names else None
            return self._names

    def size(self, dim: int | None = None) -> int:
        shape = self.shape
        if dim is None:
            n = 1
            for s in shape:
                n *= s
            return n
        return shape[dim]

    @property
    def device_ids(self) -> list[int]:
        return list(_bridge.bridge().meshIds(self._java))

    @property
    def mesh(self) -> list[Any]:
        """The ids as a nested list, like the `mesh` argument."""
        return _nested.nest(self.device_ids, list(self.shape))

    def __getitem__(self, names: str | Sequence[str]) -> DeviceMesh:
        """The sub-mesh over the named dimension(s) that contains this mesh's first device."""
        if isinstance(names, str):
            names = (names,)
        return DeviceMesh._wrap(_bridge.call(_bridge.bridge().subMesh, self._java, self.device_ids[0], list(names)))

    def __eq__(self, other):
        if other is self:
            return True
        return isinstance(other, DeviceMesh) and (other._java is self._java or _bridge.bridge().sameMesh(self._java, other._java))

    def __hash__(self):
        return hash(tuple(self.device_ids))

    def __repr__(self):
        return _bridge.bridge().describeMesh(self._java)


# The DeviceMesh that DeviceMesh._wrap made last.
_LAST_WRAPPED: list[DeviceMesh | None] = [None]


def init_device_mesh(device_type: str, mesh_shape: int | Sequence[int],
                     mesh_dim_names: Sequence[str] | None = None) -> DeviceMesh:
    """A mesh of devices 0..n-1 in row-major order: init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")).

    device_type is the runtime's ("cpu", or "cuda" under ./dtorch run --devices cuda:N); with --same-device all n
    ranks run on cuda:0."""
    if _is_int(mesh_shape):
        mesh_shape = (mesh_shape,)
    if not isinstance(mesh_shape, (tuple, list)):
        raise TypeError("mesh_shape must be an int or a tuple of ints, got %r" % (mesh_shape,))
    total = 1
    for s in mesh_shape:
        if not _is_int(s):
            raise TypeError("mesh_shape must hold integers, got %r" % (mesh_shape,))
        if s < 1:
            raise ValueError("mesh_shape sizes must be >= 1, got %r" % (mesh_shape,))
        total *= s
    ids = list(range(total))
    return DeviceMesh(device_type, _nested.nest(ids, list(mesh_shape)), mesh_dim_names=mesh_dim_names)


__all__ = ["DeviceMesh", "init_device_mesh", "Placement", "Shard", "Replicate", "Partial"]
