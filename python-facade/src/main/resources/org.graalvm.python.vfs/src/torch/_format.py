"""Printing tensors without numpy, in PyTorch's manner: tensor([[1., 2.], [3., 4.]])."""

import math

_SHOWN = 1000
_EDGE = 3
_DEFAULT_DTYPES = ("float32", "int64", "bool")


def _summarized(t):
    """The values to print: for large tensors only the first and last few along each dimension."""
    if t.numel() <= _SHOWN:
        return t.tolist(), False
    return _edges(t), True


def _edges(t):
    if t.dim() == 0:
        return t.item()
    n = t.shape[0]
    if n > 2 * _EDGE:
        return [_edges(t[i]) for i in range(_EDGE)] + [Ellipsis] + [_edges(t[i]) for i in range(n - _EDGE, n)]
    return [_edges(t[i]) for i in range(n)]


def _leaves(values, out):
    if isinstance(values, list):
        for v in values:
            _leaves(v, out)
    elif values is not Ellipsis:
        out.append(values)
    return out


def _float_formatter(values):
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return lambda v: _special(v)
    if all(v == int(v) for v in finite):
        biggest = max(abs(v) for v in finite)
        if biggest < 1e8:
            return lambda v: ("%.0f." % v) if math.isfinite(v) else _special(v)
    biggest = max(abs(v) for v in finite)
    smallest = min((abs(v) for v in finite if v != 0), default=1.0)
    if biggest >= 1e8 or smallest < 1e-4 or biggest / smallest > 1e5:
        return lambda v: ("%.4e" % v) if math.isfinite(v) else _special(v)
    return lambda v: ("%.4f" % v) if math.isfinite(v) else _special(v)


def _special(v):
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _render(values, fmt, width, indent):
    if not isinstance(values, list):
        return "...".rjust(width) if values is Ellipsis else fmt(values).rjust(width)
    if not values or not isinstance(values[0], list) and not (values[0] is Ellipsis and len(values) > 1 and isinstance(values[1], list)):
        return "[" + ", ".join(_render(v, fmt, width, indent + 1) for v in values) + "]"
    depth = _depth(values)
    separator = "," + "\n" * (depth - 1) + " " * (indent + 1)
    return "[" + separator.join(_render(v, fmt, width, indent + 1) for v in values) + "]"


def _depth(values):
    d = 0
    while isinstance(values, list):
        d += 1
        values = values[0] if values and values[0] is not Ellipsis else (values[1] if len(values) > 1 else None)
    return d


def _autograd_extras(t):
    """grad_fn=<MulBackward0> for a tensor a recorded operation made, requires_grad=True for a leaf that requires grad."""
    fn = t.grad_fn
    if fn is not None:
        return ["grad_fn=<%s>" % fn.name()]
    return ["requires_grad=True"] if t.requires_grad else []


def tensor_repr(t):
    dtype = t.dtype
    if t.numel() == 0:
        return _empty_repr(t)
    from .autograd.grad_mode import no_grad
    with no_grad():  # reading the values records nothing
        values, summarized = _summarized(t)
    leaves = _leaves(values, []) if isinstance(values, list) else [values]
    if dtype.is_floating_point:
        fmt = _float_formatter([float(v) for v in leaves])
    elif dtype.name == "bool":
        fmt = str
    else:
        fmt = str
    width = max((len(fmt(v)) for v in leaves), default=0)
    prefix = "tensor("
    if isinstance(values, list):
        body = _render(values, fmt, width, len(prefix))
    else:
        body = fmt(values)
    extras = []
    if t.is_cuda:
        extras.append("device='%s'" % t.device)
    if dtype.name not in _DEFAULT_DTYPES:
        extras.append("dtype=%r" % dtype)
    extras += _autograd_extras(t)
    return prefix + body + "".join(", " + e for e in extras) + ")"


def _empty_repr(t):
    """A tensor with no element, as PyTorch prints it: no values to show, so its shape unless it is (0,), and its dtype
    unless it is float32 (with no value to read, an int64 or bool tensor would look like a float one)."""
    extras = []
    if t.is_cuda:
        extras.append("device='%s'" % t.device)
    shape = tuple(t.shape)
    if len(shape) != 1:
        extras.append("size=%s" % (shape,))
    if t.dtype.name != "float32":
        extras.append("dtype=%r" % t.dtype)
    extras += _autograd_extras(t)
    return "tensor([]" + "".join(", " + e for e in extras) + ")"
