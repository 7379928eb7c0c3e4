"""Calls of libtorch operators by name, through the ATen dispatcher in the JVM.

Each argument is classified once into a kind (T tensor, i int, f float, b bool, n None, s str, d dtype, v device,
m memory format, [x] list of x; see org.dtorch.polyglot.torch.ArgKind) and converted to what Java takes (a tensor's
Java handle, a dtype's name). The kinds form a key such as "T,i|dim=i"; the overload a key fits is resolved once, in
Java, and cached here and there, so a repeated call costs the classification, one dict lookup and one Java call.
An argument of no known kind whose type defines __torch_function__ (a dtorch.Tensor) runs the call instead.
"""

import numbers

import polyglot

from . import _types
from ._interop import INT64_MAX, INT64_MIN, ForeignException, translate

JAVA = polyglot.import_value("dtorch.torch")

# Set by torch._tensor once the class exists (the two modules need each other).
Tensor = None
make_tensor = None

# A call whose first argument's type is a key here goes first to its handler, handler(op, args, kwargs), before any
# classification: dtorch registers its tensor types, whose handler runs the call when __torch_function__ would run it
# the same way, and returns NotImplemented otherwise (then the call takes the general way).
fast_types = {}


def _int(value):
    if not INT64_MIN <= value <= INT64_MAX:
        raise OverflowError("Python int %d is too large for int64" % value)
    return value


def classify(value):
    """(kind, the value Java takes) for one argument."""
    t = type(value)
    if t is Tensor:
        return "T", value._java
    if t is int:
        return "i", _int(value)
    if t is float:
        return "f", value
    if t is bool:
        return "b", value
    if value is None:
        return "n", None
    if t is str:
        return "s", value
    if t is _types.dtype:
        return "d", value.name
    if t is list or t is tuple or t is _types.Size:
        return classify_list(value)
    if t is _types.device:
        return "v", str(value)
    if t is _types.memory_format:
        return "m", value.name
    if isinstance(value, Tensor):
        return "T", value._java
    if isinstance(value, numbers.Integral):
        return "i", _int(int(value))
    if isinstance(value, numbers.Real):
        return "f", float(value)
    if isinstance(value, (list, tuple)):
        return classify_list(value)
    return "?", value


def classify_list(values):
    if not values:
        return "[e]", []
    kinds = set()
    out = []
    for v in values:
        k, c = classify(v)
        kinds.add(k)
        out.append(c)
    if len(kinds) == 1:
        k = kinds.pop()
        if k in ("i", "f", "b", "s", "T"):
            return "[" + k + "]", out
        if k == "n":
            return "[o]", out
        return "[?]", out
    if kinds <= {"i", "f"}:
        return "[f]", out
    if kinds <= {"T", "n"}:
        return "[o]", out
    return "[?]", out


def _tuple_of(names, values):
    values = [_wrap_one(v) for v in values]
    if any(names):
        return ReturnTuple(names, values)
    return tuple(values)


def _wrap_one(value):
    if value is None or type(value) in (int, float, bool):
        return value
    return make_tensor(value)


class ReturnTuple(tuple):
    """Several results with names, as torch.max(t, dim) gives (values, indices)."""

    def __new__(cls, names, values):
        self = tuple.__new__(cls, values)
        self._names = tuple(names)
        return self

    def __getattr__(self, name):
        names = tuple.__getattribute__(self, "_names")
        if name in names:
            return self[names.index(name)]
        raise AttributeError(name)

    def __repr__(self):
        return "torch.return_types(%s)" % ", ".join("%s=%r" % (n, v) for n, v in zip(self._names, self))


def _wrapper(bound):
    kind = bound.returnKind()
    if kind == "T":
        return make_tensor
    if kind == "[T]":
        return lambda r: [make_tensor(x) for x in r]
    if kind.startswith("("):
        names = tuple(bound.returnNames())
        return lambda r: _tuple_of(names, r)
    if kind == "n":
        return lambda r: None
    return lambda r: r


class Op:
    """All overloads of one ATen operator, callable with Python arguments: torch.add, torch.nn.functional.softmax ..."""

    __slots__ = ("__name__", "_java", "_calls")

    def __init__(self, name, java):
        self.__name__ = name
        self._java = java
        self._calls = {}

    def __call__(self, *args, **kwargs):
        if not kwargs:
            # The commonest calls, f(t) and f(t, u) on tensors, skip building the key.
            n = len(args)
            if n == 2 and type(args[0]) is Tensor and type(args[1]) is Tensor:
                entry = self._calls.get("T,T")
                if entry is not None:
                    try:
                        result = entry[0].call2(args[0]._java, args[1]._java)
                    except ForeignException as e:
                        raise translate(str(e)) from None
                    return entry[1](result)
            elif n == 1 and type(args[0]) is Tensor:
                entry = self._calls.get("T")
                if entry is not None:
                    try:
                        result = entry[0].call1(args[0]._java)
                    except ForeignException as e:
                        raise translate(str(e)) from None
                    return entry[1](result)
        return self.call(args, kwargs)

    def call(self, args, kwargs):
        if args:
            first = args[0]
            if (type(first) is tuple or type(first) is list) and first:
                first = first[0]  # torch.cat((a, b)): the first tensor of a leading list
            handler = fast_types.get(type(first))
            if handler is not None:
                result = handler(self, args, kwargs)
                if result is not NotImplemented:
                    return result
        kinds = []
        values = []
        for a in args:
            k, v = classify(a)
            kinds.append(k)
            values.append(v)
        key = ",".join(kinds)
        if kwargs:
            for name, a in kwargs.items():
                k, v = classify(a)
                key += "|" + name + "=" + k
                values.append(v)
        if "?" in key:
            # An argument torch does not know, such as a dtorch.Tensor, may run the call itself (__torch_function__).
            result = torch_function(self, args, kwargs)
            if result is not NotImplemented:
                return result
        entry = self._calls.get(key)
        if entry is None:
            entry = self._resolve(key)
        bound = entry[0]
        n = len(values)
        try:
            # Fixed arities: one list given to a varargs method would be spread into its elements.
            if n == 2:
                result = bound.call2(values[0], values[1])
            elif n == 1:
                result = bound.call1(values[0])
            elif n == 3:
                result = bound.call3(values[0], values[1], values[2])
            else:
                result = bound.call(*values)
        except ForeignException as e:
            raise translate(str(e)) from None
        return entry[1](result)

    def _resolve(self, key):
        try:
            bound = self._java.resolve(key)
        except ForeignException as e:
            raise translate(str(e)) from None
        entry = (bound, _wrapper(bound))
        self._calls[key] = entry
        return entry

    def schemas(self):
        """The schemas of every overload."""
        return list(self._java.schemas())

    def __repr__(self):
        return "<torch operator %s>" % self.__name__


def _overloaded_types(values, found):
    for v in values:
        t = type(v)
        if t is list or t is tuple:
            _overloaded_types(v, found)
        elif t is not Tensor and t not in found and getattr(t, "__torch_function__", None) is not None:
            # A subclass goes before its bases (it may refine their handling), otherwise the order of the arguments.
            at = next((i for i, u in enumerate(found) if issubclass(t, u)), len(found))
            found.insert(at, t)


def torch_function(func, args, kwargs):
    """PyTorch's __torch_function__ protocol: when an argument's type (at the top level, or in a list or tuple) defines
    __torch_function__, the first such type, subclasses before their bases, runs func(*args, **kwargs) in its own way,
    as DTensor's does in PyTorch. NotImplemented when no argument's type defines it; a TypeError when every type that
    does declines."""
    types = []
    _overloaded_types(args, types)
    if kwargs:
        _overloaded_types(kwargs.values(), types)
    if not types:
        return NotImplemented
    for t in types:
        result = t.__torch_function__(func, tuple(types), tuple(args), dict(kwargs or {}))
        if result is not NotImplemented:
            return result
    raise TypeError("no implementation found for '%s' on types that implement __torch_function__: %s"
                    % (getattr(func, "__name__", func), [t.__name__ for t in types]))


_OPS = {}


def op(name):
    """The operator aten::<name>, or None."""
    found = _OPS.get(name)
    if found is None:
        if name.startswith("__"):
            return None
        try:
            java = JAVA.op(name)
        except ForeignException as e:
            raise translate(str(e)) from None
        if java is None:
            return None
        found = Op(name, java)
        _OPS[name] = found
    return found


def require(name):
    """The operator aten::<name>; an AttributeError naming it if libtorch has none."""
    found = op(name)
    if found is None:
        raise AttributeError("torch has no operator %r (no aten::%s in libtorch's dispatcher)" % (name, name))
    return found
