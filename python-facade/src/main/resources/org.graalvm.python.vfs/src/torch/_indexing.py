"""t[index] and t[index] = value, made of operators: select, slice, unsqueeze for basic indexing (views), index and
index_put_ for tensors and lists as indices."""

import builtins

from ._dispatch import require

_SELECT = require("select")
_SLICE = require("slice")
_UNSQUEEZE = require("unsqueeze")
_INDEX = require("index")
_INDEX_PUT_ = require("index_put_")
_COPY_ = require("copy_")
_FILL_ = require("fill_")


def _consumed(item, tensor_type):
    """How many dimensions of the tensor an index item uses."""
    if item is None or item is Ellipsis:
        return 0
    if isinstance(item, tensor_type) and item.dtype.name in ("bool", "uint8"):
        return item.dim()
    return 1


def _basic(t, index):
    """Applies ints, slices, None and Ellipsis; returns the view and, per remaining dimension, an advanced index or
    None (only when some item is a tensor or a list)."""
    from ._tensor import Tensor
    from ._factories import tensor as make
    if type(index) is not tuple:
        index = (index,)
    ndim = t.dim()
    used = builtins.sum(_consumed(i, Tensor) for i in index)
    if used > ndim:
        raise IndexError("too many indices for tensor of dimension %d" % ndim)
    shape = list(t.shape)
    result = t
    dim = 0
    entries = []
    advanced = False
    for item in index:
        if item is None:
            result = _UNSQUEEZE(result, dim)
            shape.insert(dim, 1)
            entries.append(None)
            dim += 1
        elif item is Ellipsis:
            skip = ndim - used
            entries.extend([None] * skip)
            dim += skip
            used = ndim
        elif type(item) is int or (type(item) is not builtins.bool and hasattr(item, "__index__") and not isinstance(item, Tensor)):
            i = item.__index__()
            size = shape[dim]
            if not -size <= i < size:
                raise IndexError("index %d is out of bounds for dimension %d with size %d" % (i, dim, size))
            result = _SELECT(result, dim, i)
            del shape[dim]
        elif type(item) is slice:
            step = 1 if item.step is None else item.step
            if step <= 0:
                raise ValueError("step must be greater than zero")
            result = _SLICE(result, dim, item.start, item.stop, step)
            shape[dim] = result.shape[dim]
            entries.append(None)
            dim += 1
        elif isinstance(item, Tensor) or isinstance(item, (list, builtins.bool)):
            if not isinstance(item, Tensor):
                item = make(item)
            advanced = True
            entries.append(item)
            dim += _consumed(item, Tensor) if item.dim() > 0 or item.dtype.name != "bool" else 0
        else:
            raise TypeError("only integers, slices (`:`), ellipsis (`...`), None and long or bool tensors are valid "
                            "indices (got %s)" % type(item).__name__)
    if not advanced:
        return result, None
    while entries and entries[-1] is None:
        entries.pop()
    return result, entries


def getitem(t, index):
    view, entries = _basic(t, index)
    if entries is None:
        return view
    return _INDEX(view, entries)


def setitem(t, index, value):
    from ._tensor import Tensor
    from ._factories import tensor as make
    view, entries = _basic(t, index)
    if entries is None:
        if isinstance(value, Tensor):
            _COPY_(view, value)
        else:
            _FILL_(view, value)
        return
    if not isinstance(value, Tensor):
        value = make(value, dtype=view.dtype, device=view.device)
    _INDEX_PUT_(view, entries, value)
