"""Tensor: a global tensor on a device mesh, and the operations on it."""

from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence, Union

from . import _bridge, _dtypes, _indexing
from ._future import TensorFuture
import torch as _torch
from torch._tensor import make_tensor
from torch._interop import INT64_MAX, INT64_MIN, ForeignException
from torch import _nested
from .distributed_spec import DeviceMesh, Placement, Replicate, _placements_of, _specs

# The types the public API takes: a dtype or its name, a Python number (its type decides torch's promotion), sizes as
# varargs or one sequence, placements one per mesh dimension.
DTypeLike = Union["_dtypes.dtype", str]
Number = Union[bool, int, float]
SizeLike = Union[int, Sequence[int]]
Placements = Sequence[Placement]


def _b():
    return _bridge.bridge()


def _int64(value, what):
    """A Python int that int64 holds, exactly; beyond it an OverflowError (a double would silently round it)."""
    value = int(value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise OverflowError("%s %d does not fit in int64" % (what, value))
    return value


def _index(value, what):
    """An integer argument (a dimension, a start, a length): a float or a bool is a TypeError, never truncated."""
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value  # the common case, without the abstract base class's isinstance (slow in GraalPy)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an integer, got %r" % (what, value))
    return _int64(value, what)


def _shape(args, what="sizes"):
    """Shapes as varargs or as one tuple or list."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    for s in args:
        if type(s) is not int and (isinstance(s, bool) or not isinstance(s, numbers.Integral)):
            raise TypeError("%s must be integers, got %r" % (what, args))
    return [_int64(s, what[:-1]) for s in args]


def _scalar(value):
    """A Python number and its kind ("bool", "int", "float"), which decides torch's type promotion; None otherwise."""
    kind = type(value)
    if kind is float:
        return value, "float"
    if kind is int and INT64_MIN <= value <= INT64_MAX:
        return value, "int"
    if isinstance(value, bool):
        return value, "bool"
    if isinstance(value, numbers.Integral):
        return _int64(value, "scalar"), "int"
    if isinstance(value, numbers.Real):
        return float(value), "float"
    return None, None


_PLACEMENT_MODES = ("keep", "replicate", "raise_error")


def _mesh(device_mesh):
    if device_mesh is None:
        return DeviceMesh._wrap(_b().defaultMesh())
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError("device_mesh must be a DeviceMesh, got %r" % (device_mesh,))
    return device_mesh


class Tensor:
    """A global tensor on a device mesh: its shape, dtype, mesh and placements are known at once; its values live on the
    workers. Every operation returns a new Tensor immediately; values come back through to_torch() or to_torch_async().

    Tensor(torch_tensor, device_mesh=..., placements=...) distributes a torch.Tensor (each device copies its shard).
    """

    # _meta: (the Java tensor it describes, shape, mesh, placements), read once in one Java call: a Java tensor's
    # metadata never changes, and a Parameter's data setter replaces _java, which the first field catches.
    __slots__ = ("_java", "_meta", "__weakref__")

    def __init__(self, data: Any, device_mesh: DeviceMesh | None = None, placements: Placements | None = None) -> None:
        if isinstance(data, _torch.Tensor):
            data = _from_torch(data, device_mesh, placements)._java
        elif device_mesh is not None or placements is not None:
            raise TypeError("Tensor(data, device_mesh=..., placements=...) takes a torch.Tensor, got %r" % (data,))
        self._java = data
        self._meta = None

    # ---- metadata ----
    def _described(self):
        try:
            meta = self._meta
            if meta is not None and meta[0] is self._java:
                return meta
        except AttributeError:
            pass  # made without __init__ (object.__new__), as a Parameter is
        java = self._java
        described = _b().describe(java)
        meta = (java, tuple(described[0]), DeviceMesh._wrap(described[1], described[2]), _placements_of(described[3]))
        self._meta = meta
        return meta

    @property
    def shape(self) -> tuple[int, ...]:
        return self._described()[1]

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        shape = self.shape
        if dim is None:
            return shape
        d = _index(dim, "dim")
        n = len(shape)
        if not -n <= d < n:
            raise IndexError("size: dimension %d is out of range (expected to be in range of [%d, %d])" % (d, -n, n - 1))
        return shape[d]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def dtype(self) -> _dtypes.dtype:
        return _dtypes.of(_b().dtype(self._java))

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._described()[2]

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self._described()[3]

    def __repr__(self) -> str:
        return "Tensor(shape=%s, dtype=%r, device_mesh=%r, placements=%r)" % (
            self.shape, self.dtype, self.device_mesh, self.placements)

    __str__ = __repr__

    def __len__(self) -> int:
        return self.shape[0]

    @classmethod
    def __torch_function__(cls, func: Any, types: tuple, args: tuple = (), kwargs: dict | None = None) -> Any:
        """torch.* and torch.nn.functional.* calls that get a distributed tensor run here (see _torch_calls)."""
        return _torch_calls.torch_function(func, args, kwargs or {})

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Any other ATen operator as a method (t.amax(1), t.clamp(min=0)): the generic path (see aten())."""
        if name.startswith("_") or not _has_op(name):
            raise AttributeError("'dtorch.Tensor' object has no attribute %r" % (name,))

        def method(*args, **kwargs):
            return aten(name, (self,) + args, kwargs)

        method.__name__ = name
        return method

    # ---- element-wise ----
    def _binary(self, op, other, reverse=False):
        if type(other) is Tensor or isinstance(other, Tensor):
            a, b = (other, self) if reverse else (self, other)
            try:
                return _fastpath.wrap(_b().binary(op, a._java, b._java))
            except ForeignException as e:
                raise _bridge.translate(str(e)) from None
        value, kind = _scalar(other)
        if kind is not None:
            if reverse:
                op = {"add": "add", "mul": "mul", "sub": "rsub", "div": "rdiv"}[op]
            return _fastpath.wrap(_bridge.call(_b().scalar, op, self._java, value, kind))
        return NotImplemented

    def __add__(self, other: Tensor | Number) -> Tensor:
        return self._binary("add", other)

    def __radd__(self, other: Tensor | Number) -> Tensor:
        return self._binary("add", other, reverse=True)

    def __sub__(self, other: Tensor | Number) -> Tensor:
        return self._binary("sub", other)

    def __rsub__(self, other: Tensor | Number) -> Tensor:
        return self._binary("sub", other, reverse=True)

    def __mul__(self, other: Tensor | Number) -> Tensor:
        return self._binary("mul", other)

    def __rmul__(self, other: Tensor | Number) -> Tensor:
        return self._binary("mul", other, reverse=True)

    def __truediv__(self, other: Tensor | Number) -> Tensor:
        return self._binary("div", other)

    def __rtruediv__(self, other: Tensor | Number) -> Tensor:
        return self._binary("div", other, reverse=True)

    def __matmul__(self, other: Tensor) -> Tensor:
        return self.matmul(other)

    def __neg__(self) -> Tensor:
        return self.neg()

    # ---- the other arithmetic operators, as torch's: t ** 2, 2 ** t, t // 3, t % 3, 5 % t, abs(t), +t ----
    def __pow__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("pow", other)

    def __rpow__(self, other: Number) -> Tensor:
        return aten("pow", (other, self)) if _scalar(other)[1] is not None else NotImplemented

    def __floordiv__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("floor_divide", other)

    def __mod__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("remainder", other)

    def __rmod__(self, other: Number) -> Tensor:
        return aten("remainder", (other, self)) if _scalar(other)[1] is not None else NotImplemented

    def __abs__(self) -> Tensor:
        return aten("abs", (self,))

    def __pos__(self) -> Tensor:
        return self

    def add(self, other):
        return self.__add__(other)

    def sub(self, other):
        return self.__sub__(other)

    def mul(self, other):
        return self.__mul__(other)

    def div(self, other):
        return self.__truediv__(other)

    # ---- comparison, logical and bitwise operators: element-wise ATen operators through the generic path, so the
    # result dtypes are torch's (bool for comparisons; bool & bool is bool, int & int is int; an int tensor compared
    # with a float compares in floating point; Python ints stay exact int64). The method forms (t.gt(0), t.eq(u),
    # t.logical_and(u), t.bitwise_not()) and dtorch.gt(...) reach the same operators through __getattr__. ----
    def _elementwise(self, op, other):
        if isinstance(other, (Tensor, _torch.Tensor)) or _scalar(other)[1] is not None:
            return aten(op, (self, other))  # a local torch.Tensor gets aten's TypeError, not a silent False
        return NotImplemented

    def __gt__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("gt", other)

    def __lt__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("lt", other)

    def __ge__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("ge", other)

    def __le__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("le", other)

    def __eq__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("eq", other)

    def __ne__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("ne", other)

    __hash__ = object.__hash__  # identity, as torch.Tensor's: == gives a tensor, not a truth value

    def __and__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("bitwise_and", other)

    __rand__ = __and__

    def __or__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("bitwise_or", other)

    __ror__ = __or__

    def __xor__(self, other: Tensor | Number) -> Tensor:
        return self._elementwise("bitwise_xor", other)

    __rxor__ = __xor__

    def __invert__(self) -> Tensor:
        if self.dtype.is_floating_point:
            raise TypeError("~ (bitwise_not) takes an integral or bool tensor, got %s" % self.dtype)
        return aten("bitwise_not", (self,))

    def item(self) -> Number:
        """The value of a one-element tensor as a Python number: a blocking read of the value (to_torch())."""
        n = self.numel()
        if n != 1:
            raise RuntimeError("a Tensor with %d elements cannot be converted to Scalar" % n)
        return self.to_torch().item()

    def __bool__(self) -> bool:
        """The truth of a one-element tensor, as torch's: a blocking read of its value. Several elements (or none) are
        ambiguous, as in torch: use .any() or .all()."""
        n = self.numel()
        if n == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if n != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def _unary(self, op):
        return Tensor(_bridge.call(_b().unary, op, self._java))

    def neg(self):
        return self._unary("neg")

    def relu(self):
        return self._unary("relu")

    def silu(self):
        return self._unary("silu")

    def gelu(self):
        return self._unary("gelu")

    def exp(self):
        return self._unary("exp")

    def tanh(self):
        return self._unary("tanh")

    def sigmoid(self):
        return self._unary("sigmoid")

    # ---- linear algebra and reductions ----
    def matmul(self, other: Tensor) -> Tensor:
        """self @ other, as torch.matmul, through the generic path (the matmul family's sharding rules, see aten())."""
        if not isinstance(other, Tensor):
            return NotImplemented
        return aten("matmul", (self, other))

    def _reduce(self, kind, dim, keepdim):
        if dim is None:
            dims = []
        elif isinstance(dim, (tuple, list)):
            dims = [_index(d, "dim") for d in dim]
        else:
            dims = [_index(dim, "dim")]
        return Tensor(_bridge.call(_b().reduce, kind, self._java, dims, bool(keepdim)))

    def sum(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce("sum", dim, keepdim)

    def mean(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce("mean", dim, keepdim)

    def max(self, dim: int | None = None, keepdim: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """As torch: the largest value (a 0-d tensor) without `dim`; with an int `dim`, the named tuple (values, indices)
        over it (the generic path's aten::max.dim). t.amax(dims) takes several dims."""
        if dim is None:
            return self._reduce("max", None, False)
        return aten("max", (self, dim), {"keepdim": keepdim})

    # ---- shape (the generic path: a shard survives where the view keeps its dimension, else it is gathered) ----
    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return aten("transpose", (self, _index(dim0, "dim0"), _index(dim1, "dim1")))

    @property
    def T(self) -> Tensor:
        return self.transpose(0, 1)

    def permute(self, *dims: SizeLike) -> Tensor:
        return aten("permute", (self, _shape(dims, "dims")))

    def reshape(self, *shape: SizeLike) -> Tensor:
        return aten("reshape", (self, _shape(shape)))

    def view(self, *shape: SizeLike) -> Tensor:
        return aten("view", (self, _shape(shape)))

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        return aten("narrow", (self, _index(dim, "dim"), _index(start, "start"), _index(length, "length")))

    def __getitem__(self, index: Any) -> Tensor:
        """t[1:5, 2], t[..., None], t[idx] (one long tensor or list): select, slice, unsqueeze and index_select; t[mask]
        (a bool mask of the leading dimensions) blocks to read the mask's count first, see _indexing._getitem_mask."""
        return _indexing.getitem(self, index)

    def __setitem__(self, index: Any, value: Tensor | Number) -> None:
        """t[1:5] = v, t[..., i, :] = 0, t[mask] = v, t[idx] = v: in place, as in torch. Every device writes the part of the
        indexed box in its own shard (a one-row write touches one row's bytes); views of t, and t itself when it is a view,
        see the change."""
        _indexing.setitem(self, index, value)

    # ---- in place (Python's augmented assignments are torch's in-place operators) ----
    def __iadd__(self, other: Tensor | Number) -> Tensor:
        return aten("add_", (self, other))

    def __isub__(self, other: Tensor | Number) -> Tensor:
        return aten("sub_", (self, other))

    def __imul__(self, other: Tensor | Number) -> Tensor:
        return aten("mul_", (self, other))

    def __itruediv__(self, other: Tensor | Number) -> Tensor:
        return aten("div_", (self, other))

    def __iand__(self, other: Tensor | Number) -> Tensor:
        return aten("bitwise_and_", (self, other))

    def __ior__(self, other: Tensor | Number) -> Tensor:
        return aten("bitwise_or_", (self, other))

    def __ixor__(self, other: Tensor | Number) -> Tensor:
        return aten("bitwise_xor_", (self, other))

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """to(dtype), to(device), to(device, dtype), to(other), with dtype=, device=, non_blocking=, copy= and
        memory_format=, as in torch: this tensor itself when nothing changes (unless copy=True). The device stays the
        mesh's device kind (see _to)."""
        from . import _to
        return _to.convert(self, args, kwargs)

    # ---- autograd (the runtime's tape, see _autograd and docs/training.md) ----
    @property
    def requires_grad(self) -> bool:
        return _b().autograd().requiresGrad(self._java)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        _bridge.call(_b().autograd().setRequiresGrad, self._java, bool(value))

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Starts (or stops) recording operators on this leaf; floating-point and complex dtypes only."""
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self) -> Tensor | None:
        """The gradient backward() accumulated into this tensor (its mesh and placements, Partial as Replicate), or None."""
        g = _b().autograd().grad(self._java)
        return None if g is None else Tensor(g)

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and not isinstance(value, Tensor):
            raise TypeError("assigned grad expected to be a dtorch.Tensor or None but got %s" % type(value).__name__)
        _bridge.call(_b().autograd().setGrad, self._java, None if value is None else value._java)

    @grad.deleter
    def grad(self) -> None:
        _bridge.call(_b().autograd().setGrad, self._java, None)

    @property
    def is_leaf(self) -> bool:
        return _b().autograd().isLeaf(self._java)

    @property
    def grad_fn(self) -> Any:
        """The recorded operator that made this tensor (grad_fn.name() is the operator's name), or None for a leaf."""
        from torch._autograd import GradFn
        name = _b().autograd().gradFn(self._java)
        return None if name is None else GradFn(name)

    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: Sequence[Tensor] | None = None) -> None:
        """Accumulates the gradient of this tensor (a scalar, or seeded with `gradient`) into the .grad of the leaves it
        depends on (of `inputs` only, when given), as distributed operators; the graph is freed unless retain_graph."""
        from . import _autograd
        _autograd.backward([self], [gradient], retain_graph, create_graph, [] if inputs is None else list(inputs))

    def detach(self) -> Tensor:
        """The same values and memory, without history: a leaf that does not require grad."""
        return Tensor(_bridge.call(_b().autograd().detach, self._java))

    def __deepcopy__(self, memo: dict) -> Tensor:
        """A new leaf on the same mesh and placements with a copy of each shard, requires_grad and a deep copy of .grad,
        as torch copies its tensors; only leaves can be copied so."""
        from torch._tensor import deepcopy_leaf
        return deepcopy_leaf(self, memo)

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Any:
        """Calls hook(grad) with this tensor's gradient (a distributed tensor) whenever a backward pass computes it; a
        returned tensor replaces the gradient. Returns a handle whose remove() takes the hook off."""
        from . import _autograd
        return _autograd.register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> Any:
        """Calls hook(self) each time backward() has accumulated a gradient into this leaf's .grad (an optimizer can step
        it there and free the gradient). Returns a handle whose remove() takes the hook off."""
        from . import _autograd
        if not callable(hook):
            raise TypeError("register_post_accumulate_grad_hook: the hook must be callable, got %r" % (hook,))
        try:
            handle = _bridge.call(_b().autograd().registerPostAccumulateGradHook, self._java, lambda _leaf: hook(self))
        except ValueError as e:  # a non-leaf, or a tensor that does not require grad: torch's RuntimeError
            raise RuntimeError(str(e)) from None
        return _autograd.RemovableHandle(handle)

    def retain_grad(self) -> None:
        """Keeps this tensor's gradient in .grad after backward although a recorded operator made it."""
        _bridge.call(_b().autograd().retainGrad, self._java)

    @property
    def retains_grad(self) -> bool:
        return _b().autograd().retainsGrad(self._java)

    # ---- distribution ----
    def redistribute(self, device_mesh: DeviceMesh | None = None, placements: Placements | None = None) -> Tensor:
        """Moves the tensor to `placements` on `device_mesh` (this mesh if None), running the collectives that takes."""
        mesh = self.device_mesh if device_mesh is None else _mesh(device_mesh)
        if placements is None:
            placements = [Replicate()] * mesh.ndim
        return _fastpath.wrap(_bridge.call(_b().redistribute, self._java, mesh._java, ",".join(_specs(placements, self.ndim))))

    def redistribute_like(self, other: Tensor) -> Tensor:
        """Moves the tensor to `other`'s mesh and placements."""
        return self.redistribute(other.device_mesh, other.placements)

    def redistribute_by_dict(self, placements_dict: dict[str, Placement] | None = None, device_mesh: DeviceMesh | None = None,
                             default_placement_mode: str = "keep") -> Tensor:
        """Moves the tensor to placements named by mesh dimension: t.redistribute_by_dict({"tp": Replicate()}).

        device_mesh is the target mesh (default: this tensor's). On this tensor's mesh a name the mesh lacks is an
        error; on another mesh, names it lacks are ignored. The target mesh's dimensions the dict does not name get,
        by default_placement_mode: "keep" (default) the placement of the same-named dimension of this tensor's mesh
        (Replicate where this mesh has none), "replicate" Replicate(), "raise_error" a ValueError naming them.
        """
        if placements_dict is None:
            placements_dict = {}
        if not isinstance(placements_dict, dict):
            raise TypeError("redistribute_by_dict() needs a dict of mesh dimension name -> placement, got %r" % (placements_dict,))
        if default_placement_mode not in _PLACEMENT_MODES:
            raise ValueError("default_placement_mode must be one of %s, got %r" % (", ".join(_PLACEMENT_MODES), default_placement_mode))
        source = self.device_mesh
        target = source if device_mesh is None else _mesh(device_mesh)
        names = target.mesh_dim_names
        if not names:
            raise ValueError("redistribute_by_dict() needs a mesh with dimension names; %r has none" % (target,))
        if target == source:
            unknown = [name for name in placements_dict if name not in names]
            if unknown:
                raise ValueError("mesh %r has no dimension %r (its dimensions are %r)" % (target, unknown[0], names))
        unnamed = [name for name in names if name not in placements_dict]
        if unnamed and default_placement_mode == "raise_error":
            raise ValueError("redistribute_by_dict(): no placement for mesh dimension(s) %r (default_placement_mode="
                             "'raise_error'); name every dimension of %r" % (unnamed, names))
        source_names = source.mesh_dim_names or ()
        current = self.placements
        placements = []
        for name in names:
            if name in placements_dict:
                placements.append(placements_dict[name])
            elif default_placement_mode == "keep" and name in source_names:
                placements.append(current[source_names.index(name)])
            else:
                placements.append(Replicate())
        return self.redistribute(target, placements)

    def copy_(self, src: Tensor) -> Tensor:
        """Writes `src` into this tensor (redistributing and converting as needed); returns this tensor."""
        _bridge.call(_b().copyInto, self._java, src._java)
        return self

    # ---- values ----
    def to_torch_async(self) -> TensorFuture:
        """A TensorFuture of the whole tensor; returns at once."""
        return TensorFuture(_bridge.call(_b().getTensorAsync, self._java), self)

    def to_torch(self) -> _torch.Tensor:
        """The whole tensor in this process (blocks until the workers produced it)."""
        return self.to_torch_async().get()

    # ---- the local-shard API (PyTorch DTensor's names, single-controller meanings: one tensor per device) ----
    @staticmethod
    def from_local(tensors: Sequence[_torch.Tensor], device_mesh: DeviceMesh | None = None, placements: Placements | None = None,
                   shape: Sequence[int] | None = None, run_check: bool = False) -> Tensor:
        """A distributed tensor made of one local torch.Tensor per device of `device_mesh`, in the mesh's device order
        (device_mesh.device_ids): each is its device's shard, replica or partial value under `placements` (default:
        Replicate on every mesh dimension). Their dtype and device kind must agree, and each shape must be the one the
        layout of `shape` gives its device; shape=None infers it (the local sizes summed along sharded dimensions).
        Everything is checked before anything moves; an error names the device, its shape and the expected one.

        Replicas are taken as given (PyTorch's run_check=False); run_check=True compares them and names the first device
        whose tensor differs. In thread mode each device keeps a reference to its tensor, not a copy, so later writes to
        it are visible, as with PyTorch's from_local (a tensor given for several devices, as [x] * 4, is copied for all
        but the first, so that every device owns its memory); with worker processes each receives a copy of its own."""
        if isinstance(tensors, _torch.Tensor) or not isinstance(tensors, (list, tuple)):
            raise TypeError("from_local() takes a list of torch.Tensors, one per device of the mesh in its device order "
                            "(a single controller holds them all), got %r" % (type(tensors).__name__,))
        for i, t in enumerate(tensors):
            if not isinstance(t, _torch.Tensor):
                raise TypeError("from_local(): tensors[%d] must be a torch.Tensor, got %r" % (i, type(t).__name__))
        mesh = _mesh(device_mesh)
        ndim = tensors[0].ndim if tensors else 0
        size = None if shape is None else _shape((tuple(shape),), "shape sizes")
        return Tensor(_bridge.call(_b().fromLocal, [t._java for t in tensors], mesh._java, _specs(placements, ndim), size,
                                   bool(run_check)))

    def to_local(self) -> list[_torch.Tensor]:
        """Every device's local tensor (its shard, replica or partial value), one torch.Tensor per device in the mesh's
        device order, as PyTorch's to_local gives one rank's. In thread mode they are the workers' tensors themselves
        (no copy: an in-place change through one changes the shard, as PyTorch's to_local aliases it); with worker
        processes, copies. One blocking read, up to the runtime's timeout, whose error names the devices that did not
        answer."""
        return [make_tensor(t) for t in _bridge.call(_b().toLocal, self._java)]

    def full_tensor(self) -> _torch.Tensor:
        """The whole tensor as one torch.Tensor: PyTorch's name for to_torch()."""
        return self.to_torch()

    def close(self) -> None:
        """Releases the tensor on the workers now (otherwise when garbage-collected). Idempotent."""
        _b().close(self._java)

    def __enter__(self) -> Tensor:
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False


# ---- factories ----

_SEED = [0, 0]


def manual_seed(seed: int) -> None:
    """Seeds rand and randn: the same seed gives the same values, whatever the mesh."""
    _SEED[0] = int(seed)
    _SEED[1] = 0


def _next_seed(seed):
    if seed is not None:
        return int(seed)
    _SEED[1] += 1
    return _SEED[0] * 1000003 + _SEED[1]


def _factory_mesh(device_mesh):
    """A factory's mesh: the one given, else the runtime's first device alone, as DTorch makes a tensor without a mesh,
    so that a script's scratch tensors cost no communication."""
    if device_mesh is not None:
        return _mesh(device_mesh)
    default = DeviceMesh._wrap(_b().defaultMesh())
    return DeviceMesh(default.device_type, [default.device_ids[0]])


def _factory(kind, size, dtype, device_mesh, placements, seed=0, requires_grad=False):
    mesh = _factory_mesh(device_mesh)
    shape = _shape(size)
    java = _bridge.call(_b().factory, kind, shape, _dtypes.of(dtype).name, mesh._java, _specs(placements, len(shape)),
                        _int64(seed, "seed"))
    return _leaf(Tensor(java), requires_grad)


def _leaf(t, requires_grad):
    """`t`, made to require grad when asked (a factory's requires_grad=True)."""
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size: SizeLike, dtype: DTypeLike | None = None, device_mesh: DeviceMesh | None = None,
          placements: Placements | None = None, requires_grad: bool = False) -> Tensor:
    return _factory("zeros", size, dtype, device_mesh, placements, requires_grad=requires_grad)


def ones(*size: SizeLike, dtype: DTypeLike | None = None, device_mesh: DeviceMesh | None = None,
         placements: Placements | None = None, requires_grad: bool = False) -> Tensor:
    return _factory("ones", size, dtype, device_mesh, placements, requires_grad=requires_grad)


def empty(*size: SizeLike, dtype: DTypeLike | None = None, device_mesh: DeviceMesh | None = None,
          placements: Placements | None = None, requires_grad: bool = False) -> Tensor:
    return _factory("empty", size, dtype, device_mesh, placements, requires_grad=requires_grad)


def full(size: SizeLike, fill_value: Number, dtype: DTypeLike | None = None, device_mesh: DeviceMesh | None = None,
         placements: Placements | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with `fill_value`; its dtype, if not given, follows the value: bool, int64 or float32."""
    value, kind = _scalar(fill_value)
    if kind is None:
        raise TypeError("full() needs a bool, int or float fill_value, got %r" % (fill_value,))
    if dtype is None:
        dtype = {"bool": _dtypes.bool, "int": _dtypes.int64, "float": _dtypes.float32}[kind]
    mesh = _factory_mesh(device_mesh)
    shape = _shape((size,) if isinstance(size, numbers.Integral) else (tuple(size),))
    return _leaf(Tensor(_bridge.call(_b().full, shape, _dtypes.of(dtype).name, mesh._java, _specs(placements, len(shape)), value,
                                     kind)), requires_grad)


def rand(*size: SizeLike, dtype: DTypeLike | None = None, device_mesh: DeviceMesh | None = None,
         placements: Placements | None = None, seed: int | None = None, requires_grad: bool = False) -> Tensor:
    return _factory("rand", size, dtype, device_mesh, placements, seed=_next_seed(seed), requires_grad=requires_grad)


def randn(*size: SizeLike, dtype: DTypeLike | None = None, device_mesh: DeviceMesh | None = None,
          placements: Placements | None = None, seed: int | None = None, requires_grad: bool = False) -> Tensor:
    return _factory("randn", size, dtype, device_mesh, placements, seed=_next_seed(seed), requires_grad=requires_grad)


def arange(start: Number, end: Number | None = None, step: Number = 1, dtype: DTypeLike | None = None,
           device_mesh: DeviceMesh | None = None, placements: Placements | None = None) -> Tensor:
    """start, start + step, ... below end: computed in exact int64 when all three are ints, else in double."""
    if end is None:
        start, end = 0, start
    kinds = [_scalar(v)[1] for v in (start, end, step)]
    if None in kinds:
        raise TypeError("arange() needs numbers, got %r, %r, %r" % (start, end, step))
    integral = all(k != "float" for k in kinds)
    if dtype is None:
        dtype = _dtypes.int64 if integral else _dtypes.float32
    values = [_int64(v, "arange bound") for v in (start, end, step)] if integral else [float(v) for v in (start, end, step)]
    mesh = _factory_mesh(device_mesh)
    return Tensor(_bridge.call(_b().arange, values[0], values[1], values[2], integral, _dtypes.of(dtype).name, mesh._java,
                               _specs(placements, 1)))


def _from_torch(data, device_mesh, placements):
    mesh = _mesh(device_mesh)
    return Tensor(_bridge.call(_b().fromTorch, data._java, mesh._java, _specs(placements, data.ndim)))


def _like(tensor, name):
    """The shape, mesh and placements a *_like factory copies from `tensor`; a Partial dimension becomes Replicate (a
    new tensor holds whole values)."""
    if not isinstance(tensor, Tensor):
        raise TypeError("%s() takes a dtorch.Tensor, got %r" % (name, tensor))
    placements = [p if p.is_shard() else Replicate() for p in tensor.placements]
    return tuple(tensor.shape), tensor.device_mesh, placements


def zeros_like(input: Tensor, dtype: DTypeLike | None = None) -> Tensor:
    """zeros of `input`'s shape, mesh and placements (and dtype unless given)."""
    shape, mesh, placements = _like(input, "zeros_like")
    return zeros(*shape, dtype=dtype or input.dtype, device_mesh=mesh, placements=placements)


def ones_like(input: Tensor, dtype: DTypeLike | None = None) -> Tensor:
    """ones of `input`'s shape, mesh and placements (and dtype unless given)."""
    shape, mesh, placements = _like(input, "ones_like")
    return ones(*shape, dtype=dtype or input.dtype, device_mesh=mesh, placements=placements)


def empty_like(input: Tensor, dtype: DTypeLike | None = None) -> Tensor:
    """An uninitialized tensor of `input`'s shape, mesh and placements (and dtype unless given)."""
    shape, mesh, placements = _like(input, "empty_like")
    return empty(*shape, dtype=dtype or input.dtype, device_mesh=mesh, placements=placements)


def full_like(input: Tensor, fill_value: Number, dtype: DTypeLike | None = None) -> Tensor:
    """`fill_value` in `input`'s shape, mesh and placements (and dtype unless given)."""
    shape, mesh, placements = _like(input, "full_like")
    return full(shape, fill_value, dtype=dtype or input.dtype, device_mesh=mesh, placements=placements)


def rand_like(input: Tensor, dtype: DTypeLike | None = None, seed: int | None = None) -> Tensor:
    """Uniform [0, 1) values of `input`'s shape, mesh and placements, seeded as rand() is."""
    shape, mesh, placements = _like(input, "rand_like")
    return rand(*shape, dtype=dtype or input.dtype, device_mesh=mesh, placements=placements, seed=seed)


def randn_like(input: Tensor, dtype: DTypeLike | None = None, seed: int | None = None) -> Tensor:
    """Standard normal values of `input`'s shape, mesh and placements, seeded as randn() is."""
    shape, mesh, placements = _like(input, "randn_like")
    return randn(*shape, dtype=dtype or input.dtype, device_mesh=mesh, placements=placements, seed=seed)


from_local = Tensor.from_local


def distribute_tensor(tensor: _torch.Tensor, device_mesh: DeviceMesh | None = None,
                      placements: Placements | None = None) -> Tensor:
    """A distributed tensor from a torch.Tensor: each device of `device_mesh` copies its shard (PyTorch DTensor's name)."""
    if not isinstance(tensor, _torch.Tensor):
        raise TypeError("distribute_tensor() takes a torch.Tensor, got %r" % (tensor,))
    return _leaf(_from_torch(tensor, device_mesh, placements), tensor.requires_grad)


def tensor(data: Any, dtype: DTypeLike | None = None, device_mesh: DeviceMesh | None = None,
           placements: Placements | None = None, requires_grad: bool = False) -> Tensor:
    """A distributed tensor from nested Python lists, a number, or a torch.Tensor (made with torch, or a value that
    came back). Without a mesh it is on the runtime's first device alone, as the other factories."""
    mesh = _factory_mesh(device_mesh)
    if isinstance(data, _torch.Tensor):
        if dtype is not None and _dtypes.of(dtype) != data.dtype:
            data = data.to(_dtypes.of(dtype))
        return _leaf(_from_torch(data, mesh, placements), requires_grad)
    flat, shape = _nested.flatten(data)
    for i, v in enumerate(flat):
        value, kind = _scalar(v)
        if kind is None:
            raise TypeError("tensor(): the values must be bools, ints or floats, got %r" % (v,))
        flat[i] = value
    if dtype is None:
        if all(isinstance(v, bool) for v in flat):
            dtype = _dtypes.bool
        elif all(isinstance(v, numbers.Integral) for v in flat):
            dtype = _dtypes.int64
        else:
            dtype = _dtypes.float32
    return _leaf(Tensor(_bridge.call(_b().fromValues, flat, shape, _dtypes.of(dtype).name, mesh._java,
                                     _specs(placements, len(shape)))), requires_grad)


# ---- any ATen operator ----

def _has_op(name):
    return _torch._dispatch.op(name) is not None


def _returns(result):
    if len(result) == 2:  # one return, the common case: its name does not matter
        r = result[1]
        return [Tensor(t) for t in r] if _is_java_list(r) else Tensor(r)
    names = tuple(result[0])
    tensors = [[Tensor(t) for t in r] if _is_java_list(r) else Tensor(r) for r in list(result)[1:]]
    if len(tensors) == 1:
        return tensors[0]
    if any(names):
        return _torch._dispatch.ReturnTuple(names, tensors)
    return tuple(tensors)


def _is_java_list(value):
    """True for the Java array PyBridge.aten gives for a Tensor[] return (a list in Python, as in torch)."""
    return isinstance(value, _bridge.polyglot.ForeignList)


def aten(name: str, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None) -> Any:
    """The ATen operator `name` on distributed tensors: the overload is chosen as torch chooses it, every device runs it
    on its local shards, and the operator's sharding strategy (pointwise, reduction, matmul, concat-split, or replicate
    as a fallback) moves inputs where needed. dtorch.<op>(...), Tensor.<op>() and dtorch.nn.functional.<op> reach it for
    names that are not written by hand. Lists of distributed tensors go where the schema takes a Tensor[] (dtorch.cat([a, b])),
    and a Tensor[] return is a Python list (t.split(2))."""
    result = _fastpath.call(name, args, kwargs)
    if result is not _fastpath.MISS:
        return result
    kinds = []
    values = []

    def add(value):
        if isinstance(value, Tensor):
            kinds.append("T")
            values.append(value._java)
        elif isinstance(value, (list, tuple)) and value and any(isinstance(v, Tensor) for v in value):
            if not all(isinstance(v, Tensor) for v in value):
                raise TypeError("%s(): a list of distributed tensors cannot hold anything else (got %s); wrap local "
                                "torch.Tensors with dtorch.Tensor(t, device_mesh=..., placements=...)"
                                % (name, ", ".join(type(v).__name__ for v in value)))
            kinds.append("[T]")
            values.append([v._java for v in value])
        elif isinstance(value, _torch.Tensor):
            raise TypeError("%s(): a local torch.Tensor cannot be mixed with distributed tensors; wrap it with "
                            "dtorch.Tensor(t, device_mesh=..., placements=...)" % name)
        else:
            k, v = _torch._dispatch.classify(value)
            kinds.append(k)
            values.append(v)

    for a in args:
        add(a)
    key = ",".join(kinds)
    for kw, a in (kwargs or {}).items():
        add(a)
        key += "|" + kw + "=" + kinds[-1]
    result = _bridge.call(_b().aten, name, key, values)
    out = (kwargs or {}).get("out")
    if out is not None:
        return out  # an out= call returns the tensors it wrote, as torch does
    returned = _returns(result)
    if name.endswith("_") and args and isinstance(args[0], Tensor) and isinstance(returned, Tensor) and returned._java == args[0]._java:
        return args[0]  # an in-place operator returns the tensor it wrote
    return returned


# ---- functions ----

def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x @ weight.T + bias, as torch.nn.functional.linear, through the generic path (the matmul family, see aten())."""
    return aten("linear", (input, weight) if bias is None else (input, weight, bias))


def matmul(a: Tensor, b: Tensor) -> Tensor:
    return a.matmul(b)


def einsum(equation: str, *operands: Tensor | Sequence[Tensor]) -> Tensor:
    """torch.einsum(equation, *operands), operands also as one list, through the generic path (the matmul family: a
    label sharded alike on every operand that holds it stays sharded in the output, or gives a partial sum when summed
    away)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return aten("einsum", (equation, list(operands)))


def relu(t: Tensor) -> Tensor:
    return t.relu()


def silu(t: Tensor) -> Tensor:
    return t.silu()


def gelu(t: Tensor) -> Tensor:
    return t.gelu()


def redistribute(t: Tensor, device_mesh: DeviceMesh | None = None, placements: Placements | None = None) -> Tensor:
    return t.redistribute(device_mesh, placements)


def _GetTensorAsync(t: Tensor) -> TensorFuture:  # noqa: N802 - DTorch's name
    """DTorch's name for Tensor.to_torch_async()."""
    return t.to_torch_async()


get_tensor_async = _GetTensorAsync


def sync() -> None:
    """Blocks until every device has run everything issued so far."""
    _bridge.call(_b().sync)


def set_implicit_redistribution(enabled: bool) -> None:
    """Whether an operator whose inputs' placements fit none of its sharding strategies redistributes them itself, the
    cheapest way, as PyTorch DTensor does (True, the default), or refuses them with a ShardingError that names the
    placements it takes (False, the strict mode: every collective is one the script wrote). The moves it makes show in
    traces and the profiler as "redistribute (implicit, for <operator>)". Applies to the operators issued after it;
    `./dtorch run --strict-redistribution` starts in the strict mode."""
    _b().setImplicitRedistribution(bool(enabled))


def implicit_redistribution() -> bool:
    """True unless the strict mode is on (see set_implicit_redistribution)."""
    return _b().implicitRedistribution()


def device_count() -> int:
    """The number of (logical) devices of the runtime: the ranks a mesh may use."""
    return _b().deviceCount()


def _collective_count(kind):
    """The runtime's collectives of `kind` ("all_gather", "point_to_point", ...) so far, one per device and call, for
    tests that assert what an operation communicated (thread mode: worker processes count their own)."""
    return _bridge.call(_b().collectiveCount, kind.upper())


def device_type() -> str:
    """The runtime's device type, "cpu" or "cuda" (./dtorch run --devices cpu:N or cuda:N): the first argument its
    meshes take, e.g. init_device_mesh(dtorch.device_type(), (2, 2))."""
    return _b().deviceType()


from . import _fastpath, _torch_calls  # noqa: E402 - last: they import this module

_fastpath.Tensor = Tensor
_fastpath.general_returns = _returns
_fastpath.operators = _torch_calls._OPERATORS
_torch._dispatch.fast_types[Tensor] = _fastpath.dispatch
