"""torch.Tensor: a handle on a libtorch tensor in the JVM. Values stay there; Python holds the handle."""

import builtins
import numbers
import weakref

from . import _autograd, _dispatch, _format, _interop, _nested, _types
from ._dispatch import require
from ._interop import ForeignException

_isolated = None


def _ctypes(what):
    """ctypes, imported on first use: it needs native access, which an isolated script does not have."""
    global _isolated
    if _isolated is None:
        import polyglot
        _isolated = bool(polyglot.import_value("dtorch.isolated"))
    if _isolated:
        raise RuntimeError("%s needs native memory access, which a script run with --isolated does not have; "
                           "use tolist() or item() instead" % what)
    import ctypes
    return ctypes


_AUTOGRAD = _autograd.JAVA
_ADD = require("add")
_SUB = require("sub")
_MUL = require("mul")
_DIV = require("div")


class Tensor:
    """A tensor in the JVM (libtorch), with PyTorch's methods and operators.

    Every aten operator is a method (t.exp(), t.sum(1), t.add_(x)), found in the dispatcher on first use. The memory
    is freed when the Python object is collected, or at once by close() or at the end of a `with` block.
    """

    __slots__ = ("_java", "__weakref__")

    def __init__(self, data=None, *, dtype=None, device=None):
        from ._factories import tensor
        made = tensor([] if data is None else data, dtype=dtype or _types.float32, device=device)
        self._java = made._java

    # ---- metadata ----
    @property
    def shape(self):
        try:
            return _types.Size(self._java.shape())
        except ForeignException as e:
            raise _interop.translate(str(e)) from None

    def size(self, dim=None):
        shape = self._java.shape()
        if dim is None:
            return _types.Size(shape)
        n = len(shape)
        if not -n <= dim < n:
            raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)" % (-n, n - 1, dim))
        return shape[dim]

    @property
    def ndim(self):
        return self._java.dim()

    def dim(self):
        return self._java.dim()

    ndimension = dim

    def numel(self):
        return self._java.numel()

    nelement = numel

    @property
    def dtype(self):
        return _types.DTYPES[self._java.dtype()]

    @property
    def device(self):
        return _types.device(self._java.device())

    @property
    def is_cuda(self):
        return self._java.device() != "cpu"

    @property
    def nbytes(self):
        return self._java.nbytes()

    @property
    def itemsize(self):
        return self._java.elementSize()

    def element_size(self):
        return self._java.elementSize()

    # ---- autograd (libtorch's engine; see torch.autograd) ----
    @property
    def requires_grad(self):
        return _autograd.call(_AUTOGRAD.requiresGrad, self._java)

    @requires_grad.setter
    def requires_grad(self, value):
        _autograd.call(_AUTOGRAD.setRequiresGrad, self._java, builtins.bool(value))

    def requires_grad_(self, requires_grad=True):
        """Starts (or stops) recording operations on this tensor for autograd; floating-point and complex leaves only."""
        _autograd.call(_AUTOGRAD.setRequiresGrad, self._java, builtins.bool(requires_grad))
        return self

    @property
    def grad(self):
        """The gradient that backward() accumulated into this tensor (None before the first one). It is the same tensor
        each time: in-place writes to it (grad.zero_()) reach the next accumulation."""
        g = _autograd.call(_AUTOGRAD.grad, self._java)
        return None if g is None else make_tensor(g)

    @grad.setter
    def grad(self, value):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError("assigned grad expected to be a Tensor or None but got grad of type %s" % type(value).__name__)
        _autograd.call(_AUTOGRAD.setGrad, self._java, None if value is None else value._java)

    @grad.deleter
    def grad(self):
        _autograd.call(_AUTOGRAD.setGrad, self._java, None)

    @property
    def is_leaf(self):
        """True for a tensor that no recorded operation made (every tensor that does not require grad is one)."""
        return _autograd.call(_AUTOGRAD.isLeaf, self._java)

    @property
    def grad_fn(self):
        """The graph node that made this tensor (its name()), or None for a leaf."""
        name = _autograd.call(_AUTOGRAD.gradFn, self._java)
        return None if name is None else _autograd.GradFn(name)

    def retain_grad(self):
        """Keeps this non-leaf tensor's gradient in .grad after backward."""
        _autograd.call(_AUTOGRAD.retainGrad, self._java)

    @property
    def retains_grad(self):
        return _autograd.call(_AUTOGRAD.retainsGrad, self._java)

    def is_inference(self):
        """True for a tensor made in inference_mode."""
        return _autograd.call(_AUTOGRAD.isInference, self._java)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulates the gradient of this tensor (a scalar, or with a gradient of its shape) into the .grad of the
        leaves it depends on (of inputs only, when given). The graph is freed unless retain_graph."""
        from . import autograd
        autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    def __deepcopy__(self, memo):
        """A new leaf with a copy of the values, requires_grad and a deep copy of .grad, as in PyTorch (copy.deepcopy of
        modules, optimizers' states, reference models); only leaves can be copied so."""
        return deepcopy_leaf(self, memo)

    @property
    def data(self):
        """The same memory as a tensor that autograd does not track (writes through it are not seen by the graph)."""
        return make_tensor(_autograd.call(_AUTOGRAD.data, self._java))

    @data.setter
    def data(self, value):
        """t.data = u: t shows u's memory (shape, dtype, device) from now on, and stays the same tensor with its
        requires_grad and grad, as in PyTorch."""
        if not isinstance(value, Tensor):
            raise TypeError("data must be a Tensor, got %r" % (type(value).__name__,))
        _autograd.call(_AUTOGRAD.setData, self._java, value._java)

    @property
    def T(self):  # noqa: N802 - PyTorch's name
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):  # noqa: N802 - PyTorch's name
        return self.transpose(-2, -1)

    def __len__(self):
        shape = self._java.shape()
        if len(shape) == 0:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    # ---- values ----
    def tolist(self):
        """The values as nested Python lists (a number for a 0-d tensor)."""
        java = self._java
        try:
            flat = list(java.longs() if java.isIntegral() else java.doubles())
            if java.dtype() == "bool":
                flat = [v != 0 for v in flat]
            return _nested.nest(flat, tuple(java.shape()))
        except ForeignException as e:
            raise _interop.translate(str(e)) from None

    def item(self):
        """The one value of a one-element tensor, as a Python number."""
        if _interop.call(self._java.numel) != 1:
            raise RuntimeError("a Tensor with %d elements cannot be converted to Scalar" % self._java.numel())
        return _ITEM(self)

    def numpy(self):
        raise NotImplementedError("numpy is not available in DTorch's GraalPy scripts; use tolist() or memoryview()")

    def memoryview(self):
        """A zero-copy memoryview of the tensor's bytes (host, contiguous), typed and shaped where Python has a format.

        The view pins the memory: close() while a view is alive closes the tensor, and the memory is freed once the
        last view is released and collected.
        """
        ctypes = _ctypes("memoryview()")
        n = self.nbytes
        if n == 0:
            _interop.call(self._java.address)  # a closed tensor refuses, as for any size
            # No bytes to pin. Python's memoryview takes no zero in a shape, so the view is typed but flat.
            view = memoryview(b"").cast("B")
            fmt = self.dtype._format
            return view if fmt is None else view.cast(fmt)
        else:
            owned = type("_TensorBytes", (ctypes.c_char * n,), {})
            address = _interop.call(self._java.pin)
            try:
                raw = owned.from_address(address)
                weakref.finalize(raw, self._java.unpin)
            except BaseException:
                self._java.unpin()
                raise
            view = memoryview(raw).cast("B")
        fmt = self.dtype._format
        if fmt is None:
            return view
        shape = list(self.shape) or [1]
        return view.cast(fmt, shape)

    def tobytes(self):
        """The tensor's bytes, copied once into a Python bytes object."""
        ctypes = _ctypes("tobytes()")
        source = self if _interop.call(self._java.isHostContiguous) else self.contiguous().cpu()
        address = _interop.call(source._java.pin)
        try:
            return ctypes.string_at(address, source.nbytes)
        finally:
            source._java.unpin()

    def close(self):
        """Frees the tensor now (not a PyTorch method: GraalPy frees only at collections). Idempotent."""
        self._java.close()

    @property
    def closed(self):
        return self._java.isClosed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._java.isClosed():
            return "tensor(<closed>)"
        return _format.tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self._java.dim() == 0:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __bool__(self):
        if self._java.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return builtins.bool(self.item())

    def __float__(self):
        return builtins.float(self.item())

    def __int__(self):
        return builtins.int(self.item())

    def __index__(self):
        if not self._java.isIntegral() or self._java.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return builtins.int(self.item())

    def __iter__(self):
        if self._java.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._java.shape()[0]):
            yield self[i]

    __hash__ = object.__hash__

    # ---- conversions ----
    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(other), with non_blocking= and copy=."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        for a in args:
            if isinstance(a, _types.dtype):
                dtype = a
            elif isinstance(a, (str, _types.device)):
                device = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            else:
                raise TypeError("to() takes a dtype, a device or a tensor, got %r" % (a,))
        if device is not None:
            _interop.call(_dispatch.JAVA.requireDevice, str(device))
        return _TO(self, dtype=dtype, device=device, **kwargs)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else (device if isinstance(device, (str, _types.device)) else "cuda:%d" % device))

    def type(self, dtype=None):
        if dtype is None:
            return "torch." + {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor",
                               "int32": "IntTensor", "bool": "BoolTensor"}.get(self.dtype.name, "Tensor")
        return self.to(dtype)

    def float(self):
        return self.to(_types.float32)

    def double(self):
        return self.to(_types.float64)

    def half(self):
        return self.to(_types.float16)

    def bfloat16(self):
        return self.to(_types.bfloat16)

    def long(self):
        return self.to(_types.int64)

    def int(self):
        return self.to(_types.int32)

    def short(self):
        return self.to(_types.int16)

    def bool(self):
        return self.to(_types.bool)

    def byte(self):
        return self.to(_types.uint8)

    def char(self):
        return self.to(_types.int8)

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], _types.dtype):
            return _VIEW_DTYPE(self, shape[0])
        return _VIEW(self, *shape)

    # ---- operators ----
    def __add__(self, other):
        if type(other) is Tensor:
            return _ADD(self, other)
        return _ADD(self, other) if _is_operand(other) else NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        return _SUB(self, other) if type(other) is Tensor or _is_operand(other) else NotImplemented

    def __rsub__(self, other):
        return _RSUB(self, other) if _is_number(other) else NotImplemented

    def __mul__(self, other):
        return _MUL(self, other) if type(other) is Tensor or _is_operand(other) else NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other):
        return _DIV(self, other) if type(other) is Tensor or _is_operand(other) else NotImplemented

    def __rtruediv__(self, other):
        return _MUL(_RECIPROCAL(self), other) if _is_number(other) else NotImplemented

    def __floordiv__(self, other):
        return _FLOOR_DIVIDE(self, other)

    def __rfloordiv__(self, other):
        return _FLOOR_DIVIDE(_full_like(self, other), self)

    def __mod__(self, other):
        return _REMAINDER(self, other)

    def __pow__(self, other):
        return _POW(self, other)

    def __rpow__(self, other):
        return _POW(other, self)

    def __matmul__(self, other):
        return _MATMUL(self, other) if isinstance(other, Tensor) else NotImplemented

    def __rmatmul__(self, other):
        return NotImplemented

    def __neg__(self):
        return _NEG(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ABS(self)

    def __invert__(self):
        return _BITWISE_NOT(self)

    def __and__(self, other):
        return _BITWISE_AND(self, other)

    __rand__ = __and__

    def __or__(self, other):
        return _BITWISE_OR(self, other)

    __ror__ = __or__

    def __xor__(self, other):
        return _BITWISE_XOR(self, other)

    __rxor__ = __xor__

    def __eq__(self, other):
        return _EQ(self, other) if isinstance(other, Tensor) or _is_number(other) else NotImplemented

    def __ne__(self, other):
        return _NE(self, other) if isinstance(other, Tensor) or _is_number(other) else NotImplemented

    def __lt__(self, other):
        return _LT(self, other)

    def __le__(self, other):
        return _LE(self, other)

    def __gt__(self, other):
        return _GT(self, other)

    def __ge__(self, other):
        return _GE(self, other)

    def __iadd__(self, other):
        _ADD_(self, other)
        return self

    def __isub__(self, other):
        _SUB_(self, other)
        return self

    def __imul__(self, other):
        _MUL_(self, other)
        return self

    def __itruediv__(self, other):
        _DIV_(self, other)
        return self

    # ---- indexing ----
    def __getitem__(self, index):
        from . import _indexing
        return _indexing.getitem(self, index)

    def __setitem__(self, index, value):
        from . import _indexing
        _indexing.setitem(self, index, value)

    # ---- every other operator ----
    def __getattr__(self, name):
        method = _method(name)
        return method.__get__(self, Tensor)


def _is_number(value):
    t = type(value)
    return t is int or t is float or t is builtins.bool or isinstance(value, numbers.Number)


def _is_operand(value):
    """A number or a tensor of a subclass (a torch.nn.Parameter): the other operand of an arithmetic operator."""
    return _is_number(value) or isinstance(value, Tensor)


def _full_like(t, value):
    return require("full_like")(t, value)


def _method(name):
    """The method for aten::<name>, added to the class on first use so the next lookup is a plain attribute."""
    if name.startswith("__"):
        raise AttributeError("'Tensor' object has no attribute %r" % name)
    op = _dispatch.op(name)
    if op is None:
        raise AttributeError("'Tensor' object has no attribute %r (no aten::%s in libtorch's dispatcher)" % (name, name))
    if name.endswith("_"):
        def method(self, *args, **kwargs):
            op.call((self,) + args, kwargs)
            return self
    else:
        def method(self, *args, **kwargs):
            return op.call((self,) + args, kwargs)
    method.__name__ = name
    setattr(Tensor, name, method)
    return method


def make_tensor(java):
    """A Tensor around a Java handle (torch.Tensor's constructor takes data, not handles)."""
    t = object.__new__(Tensor)
    t._java = java
    return t


_dispatch.Tensor = Tensor
_dispatch.make_tensor = make_tensor

_ITEM = require("item")
_TO = require("to")
_VIEW = require("view")
_VIEW_DTYPE = require("view")
_RSUB = require("rsub")
_RECIPROCAL = require("reciprocal")
_FLOOR_DIVIDE = require("floor_divide")
_REMAINDER = require("remainder")
_POW = require("pow")
_MATMUL = require("matmul")
_NEG = require("neg")
_ABS = require("abs")
_BITWISE_NOT = require("bitwise_not")
_BITWISE_AND = require("bitwise_and")
_BITWISE_OR = require("bitwise_or")
_BITWISE_XOR = require("bitwise_xor")
_EQ = require("eq")
_NE = require("ne")
_LT = require("lt")
_LE = require("le")
_GT = require("gt")
_GE = require("ge")
_ADD_ = require("add_")
_SUB_ = require("sub_")
_MUL_ = require("mul_")
_DIV_ = require("div_")


def deepcopy_leaf(source, memo):
    """copy.deepcopy of a leaf, torch's or a distributed one: a copy of its values with its requires_grad and gradient."""
    if id(source) in memo:
        return memo[id(source)]
    if not source.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                           "at the moment")
    result = source.detach().clone()
    memo[id(source)] = result
    copy_leaf_state(source, result, memo)
    return result


def copy_leaf_state(source, result, memo):
    """What copy.deepcopy carries from one leaf to its copy besides the values: requires_grad and the gradient."""
    import copy
    if source.requires_grad:
        result.requires_grad_(True)
    if source.grad is not None:
        result.grad = copy.deepcopy(source.grad, memo)
