"""The short way of an ATen operator call on distributed tensors, taken when every value is a distributed tensor, a
Python scalar (int, float, bool, None, str), a list of ints or a list of distributed tensors: the call's signature key
is built from the values' exact types, the overload it resolves to is bound once per operator and key in Java
(PyBridge.atenCall) and kept here, and the values go to it as arguments. Whatever else a call holds (a torch.Tensor,
a dtype, an out= tensor, an int beyond int64, a subclass that defines its own __torch_function__) takes the general way,
dtorch.aten(), which raises the errors of such values; the runtime's errors are translated as the general way translates
them, so both ways give the same results and the same exceptions.

torch's operators (torch.mm, torch.nn.functional.linear, ...) reach this module first when their first argument is a
distributed tensor (torch._dispatch.fast_types), without classifying their arguments for the torch shim or collecting
the types that define __torch_function__: when this module takes the call, dtorch.Tensor's __torch_function__ is the
only one the protocol could choose, and it runs the same aten() call.
"""

from __future__ import annotations

from typing import Any

from torch import _dispatch
from torch._interop import INT64_MAX, INT64_MIN, ForeignException

from . import _bridge

# Set by _tensor once its classes and functions exist (the two modules need each other).
Tensor: Any = None
general_returns: Any = None  # _tensor._returns: a result in PyBridge.aten's array form as Python values
operators: Any = None  # _torch_calls._OPERATORS: the operators dtorch writes by hand, which take the general way

# Returned by call() when the call takes the general way.
MISS = object()

_SCALAR_KINDS = {int: "i", float: "f", bool: "b", type(None): "n", str: "s"}
# type -> whether its instances are distributed tensors the short way takes (dtorch.Tensor and its subclasses that keep
# its __torch_function__, such as distributed parameters).
_TENSOR_TYPES: dict[type, bool] = {}
# operator name -> {signature key -> (bound Java call, how its result becomes Python's)}
_BINDINGS: dict[str, dict[str, tuple[Any, Any]]] = {}
_new = object.__new__


def wrap(java: Any) -> Any:
    """A dtorch.Tensor of the Java handle `java` (Tensor(java), without its constructor's checks for a torch.Tensor)."""
    t = _new(Tensor)
    t._java = java
    t._meta = None
    return t


def _is_tensor_type(t):
    known = _TENSOR_TYPES.get(t)
    if known is None:
        known = issubclass(t, Tensor) and getattr(t.__torch_function__, "__func__", None) is Tensor.__torch_function__.__func__
        _TENSOR_TYPES[t] = known
        if known:
            _dispatch.fast_types[t] = dispatch
    return known


def _kind(value):
    """(kind, the value Java takes) for one value the short way takes, or None."""
    t = type(value)
    if t is Tensor:
        return "T", value._java
    kind = _SCALAR_KINDS.get(t)
    if kind is not None:
        if kind == "i" and not INT64_MIN <= value <= INT64_MAX:
            return None
        return kind, value
    if t is list or t is tuple:
        if not value:
            return None
        first = type(value[0])
        if first is int:
            for v in value:
                if type(v) is not int or not INT64_MIN <= v <= INT64_MAX:
                    return None
            return "[i]", list(value)
        if first is Tensor or _is_tensor_type(first):
            out = []
            for v in value:
                u = type(v)
                if u is not Tensor and not _is_tensor_type(u):
                    return None
                out.append(v._java)
            return "[T]", out
        return None
    if _is_tensor_type(t):
        return "T", value._java
    return None


def call(name: str, args: Any, kwargs: Any) -> Any:
    """dtorch.aten(name, args, kwargs) the short way, or MISS when the call holds a value the short way does not take."""
    kinds = []
    values = []
    for a in args:
        t = type(a)
        if t is Tensor:
            kinds.append("T")
            values.append(a._java)
            continue
        found = _kind(a)
        if found is None:
            return MISS
        kinds.append(found[0])
        values.append(found[1])
    key = ",".join(kinds)
    if kwargs:
        if "out" in kwargs:
            return MISS
        for kw, a in kwargs.items():
            found = _kind(a)
            if found is None:
                return MISS
            key += "|" + kw + "=" + found[0]
            values.append(found[1])
    by_key = _BINDINGS.get(name)
    entry = None if by_key is None else by_key.get(key)
    if entry is None:
        entry = _bind(name, key)
    bound = entry[0]
    n = len(values)
    try:
        # Fixed arities; more values go as one list.
        if n == 2:
            result = bound.call2(values[0], values[1])
        elif n == 1:
            result = bound.call1(values[0])
        elif n == 3:
            result = bound.call3(values[0], values[1], values[2])
        elif n == 5:
            result = bound.call5(values[0], values[1], values[2], values[3], values[4])
        elif n == 4:
            result = bound.call4(values[0], values[1], values[2], values[3])
        else:
            result = bound.callList(values)
    except ForeignException as e:
        raise _bridge.translate(str(e)) from None
    return entry[1](result, args)


def _bind(name, key):
    try:
        bound = _bridge.bridge().atenCall(name, key)
    except ForeignException as e:
        raise _bridge.translate(str(e)) from None
    in_place = name.endswith("_")
    if bound.returnsOneTensor():
        result = _one_in_place if in_place else _one
    else:
        result = _general_in_place if in_place else _general
    entry = (bound, result)
    _BINDINGS.setdefault(name, {})[key] = entry
    return entry


def _one(java, args):
    return wrap(java)


def _one_in_place(java, args):
    if args and isinstance(args[0], Tensor) and java == args[0]._java:
        return args[0]  # an in-place operator returns the tensor it wrote
    return wrap(java)


def _general(result, args):
    return general_returns(result)


def _general_in_place(result, args):
    returned = general_returns(result)
    if args and isinstance(args[0], Tensor) and isinstance(returned, Tensor) and returned._java == args[0]._java:
        return args[0]
    return returned


def dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    """torch._dispatch's short way for an operator whose first argument is a distributed tensor: the operator on
    distributed tensors, or NotImplemented when the call takes the general way (the protocol, __torch_function__)."""
    name = func.__name__
    if name in operators:
        return NotImplemented
    result = call(name, args, kwargs)
    return NotImplemented if result is MISS else result
