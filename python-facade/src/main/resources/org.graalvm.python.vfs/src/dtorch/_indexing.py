"""dt[index] and dt[index] = value on distributed tensors (see Tensor.__getitem__ and Tensor.__setitem__).

Basic indexing (ints, slices with steps, None, Ellipsis) is select, slice and unsqueeze: views, which share the tensor's
memory where they keep every shard where it is and follow it otherwise. One long index (a dtorch or torch tensor, or a
list of ints) is index_select. Assignment writes in place: a basic index is a box each device writes its part of, a bool
mask of the tensor's shape is masked_fill_ (or a where copied back), a long index is index_copy_ into the view of the
basic items."""

import builtins
import numbers

import torch as _torch

from . import _bridge
from . import _tensor  # a circular import: _tensor's names are read at call time


def _aten(name, *args):
    return _tensor.aten(name, args)


def _is_int(item):
    """An int index (a bool is not one); the type test first, as the abstract base class's isinstance is slow in GraalPy."""
    return type(item) is int or isinstance(item, numbers.Integral) and not isinstance(item, builtins.bool)


def _full_slice(item, size):
    return item.step in (None, 1) and item.start in (None, 0) and (item.stop is None or item.stop >= size)


def _index_tensor(t, item):
    """A long index as a dtorch.Tensor replicated on t's mesh."""
    from ._tensor import Tensor, _from_torch
    from .distributed_spec import Replicate
    if isinstance(item, Tensor):
        return item
    if not isinstance(item, _torch.Tensor):
        item = _torch.tensor(item, dtype=_torch.int64)
    mesh = t.device_mesh
    return _from_torch(item, mesh, [Replicate()] * mesh.ndim)


def _is_mask(item):
    return isinstance(item, (_tensor.Tensor, _torch.Tensor)) and item.dtype.name == "bool"


def getitem(t, index):
    """t[index] as a new distributed tensor: one pass over the items, each int a select, each slice that is not whole a
    slice, each None an unsqueeze, one long index an index_select (a decode step's few slices pay for no more than
    that)."""
    if type(index) is not tuple:
        if _is_mask(index):
            return _getitem_mask(t, index)
        index = (index,)
    elif len(index) == 1 and _is_mask(index[0]):
        return _getitem_mask(t, index[0])
    used = 0
    ellipses = 0
    for item in index:
        if item is Ellipsis:
            ellipses += 1
        elif item is not None:
            used += 1
    shape = t.shape
    ndim = len(shape)
    if used > ndim:
        raise IndexError("too many indices for tensor of dimension %d" % ndim)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    result = t
    dim = 0  # the result's dimension the next item applies to
    source = 0  # t's dimension it applies to
    advanced = False
    for item in index:
        if type(item) is slice:
            step = item.step
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            if not _full_slice(item, shape[source]):
                result = _aten("slice", result, dim, item.start, item.stop, 1 if step is None else step)
            dim += 1
            source += 1
        elif item is None:
            result = _aten("unsqueeze", result, dim)
            dim += 1
        elif item is Ellipsis:
            dim += ndim - used
            source += ndim - used
        elif _is_int(item):
            i = int(item)
            size = shape[source]
            if not -size <= i < size:
                raise IndexError("index %d is out of bounds for dimension %d with size %d" % (i, source, size))
            result = _aten("select", result, dim, i + size if i < 0 else i)
            source += 1
        elif isinstance(item, (_tensor.Tensor, _torch.Tensor, list)) and not _is_mask(item):
            if advanced:
                raise NotImplementedError("dtorch.Tensor indexing takes one tensor or list index; index with several in steps")
            advanced = True
            idx = _index_tensor(t, item)
            idx_shape = list(idx.shape)
            out = _aten("index_select", result, dim, idx.reshape(-1) if len(idx_shape) != 1 else idx)
            result = _aten("unflatten", out, dim, idx_shape) if idx_shape else _aten("squeeze", out, dim)
            dim += len(idx_shape)
            source += 1
        else:
            raise TypeError("dtorch.Tensor indices are ints, slices (`:`), ellipsis (`...`), None, one long tensor or list, "
                            "or (in an assignment) a bool mask of the tensor's shape; got %s" % type(item).__name__)
    return result


def _getitem_mask(t, mask):
    """t[mask] for a bool mask of t's leading dimensions (a dtorch or torch tensor; a torch one is replicated on t's mesh).

    The result's first size is the mask's number of True elements, which only the values tell: this blocks to read it
    (a synchronization point, as boolean indexing of a CUDA tensor is in torch). Where t is sharded only on dimensions the
    mask does not cover, every device selects from its own shard and those shards stay; otherwise t is replicated first,
    with a warning once naming that communication."""
    from ._bridge import bridge, call
    from ._tensor import Tensor
    if mask.ndim == 0:
        # torch's t[True] and t[False]: a new first dimension of size 1 or 0.
        return _getitem_mask(_aten("unsqueeze", t, 0), mask.reshape(1))
    shape, covered = tuple(t.shape), tuple(mask.shape)
    if len(covered) > len(shape):
        raise IndexError("too many indices for tensor of dimension %d" % len(shape))
    for d, (m, s) in enumerate(zip(covered, shape)):
        if m != s:
            raise IndexError("The shape of the mask %s at index %d does not match the shape of the indexed tensor %s at index %d"
                             % (list(covered), d, list(shape), d))
    return Tensor(call(bridge().indexByMask, t._java, _index_tensor(t, mask)._java))


def _value_tensor(t, value):
    """A value for an assignment into t: a dtorch.Tensor as it is, a torch.Tensor replicated on t's mesh."""
    if isinstance(value, _torch.Tensor):
        from ._tensor import _from_torch
        from .distributed_spec import Replicate
        mesh = t.device_mesh
        return _from_torch(value, mesh, [Replicate()] * mesh.ndim)
    return value


def setitem(t, index, value):
    """t[index] = value, in place: t keeps its placements and every device writes the part of the indexed box in its own
    shard (a one-row write touches one row's bytes); views of t see the change. A bool mask of t's shape writes where it
    is true; one long index (a tensor or list) among basic items writes those positions (index_copy_)."""
    Tensor = _tensor.Tensor
    value = _value_tensor(t, value)
    value_is_tensor = isinstance(value, Tensor)
    number, kind = (None, "tensor") if value_is_tensor else _tensor._scalar(value)
    if kind is None:
        raise TypeError("a dtorch.Tensor takes a dtorch.Tensor, a torch.Tensor or a number in an assignment, got %r" % (value,))
    if type(index) is not tuple and _is_mask(index):
        mask = _index_tensor(t, index)
        if value_is_tensor:
            t.copy_(_aten("where", mask, value, t))
        else:
            t.masked_fill_(mask, value)
        return
    items = index if type(index) is tuple else (index,)
    spec = []
    advanced = []
    for position, item in enumerate(items):
        if type(item) is slice:
            step = item.step
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            start, stop = item.start, item.stop
            spec.append("s%s,%s,%d" % ("" if start is None else int(start), "" if stop is None else int(stop),
                                        1 if step is None else int(step)))
        elif item is None:
            spec.append("n")
        elif item is Ellipsis:
            spec.append("e")
        elif _is_int(item):
            spec.append("a%d" % int(item))
        elif isinstance(item, (Tensor, _torch.Tensor, list)) and not _is_mask(item):
            advanced.append(position)
        else:
            raise TypeError("dtorch.Tensor indices are ints, slices (`:`), ellipsis (`...`), None, one long tensor or list, "
                            "or (in an assignment) a bool mask of the tensor's shape; got %s" % type(item).__name__)
    if not advanced:
        # One string for Java to read in one call (PyBridge.setItem says how it is written).
        _bridge.call(_bridge.bridge().setItem, t._java, ";".join(spec), value._java if value_is_tensor else number, kind)
        return
    if len(advanced) > 1:
        raise NotImplementedError("assignment through tensor or list indices takes one index on dtorch.Tensor")
    # The box of the basic items, with the indexed dimension whole: a view of t, which writes into t.
    position = advanced[0]
    idx = _index_tensor(t, items[position])
    if idx.ndim != 1:
        raise NotImplementedError("assignment through a tensor or list index takes a 1-D index on dtorch.Tensor")
    basic = list(items)
    basic[position] = slice(None)
    view = getitem(t, tuple(basic))
    dim = builtins.sum(1 for i in items[:position] if not _is_int(i))
    if Ellipsis in items[:position]:
        dim = position + (t.ndim - builtins.sum(1 for i in items if i is not None and i is not Ellipsis)) - 1
    shape = list(view.shape)
    shape[dim] = idx.shape[0]
    if value_is_tensor:
        src = value if value.dtype == view.dtype else value.to(view.dtype)
        while src.ndim > len(shape) and src.shape[0] == 1:
            src = _aten("squeeze", src, 0)
        if list(src.shape) != shape:
            src = _aten("expand", src, shape)
        view.index_copy_(dim, idx, src)
    else:
        view.index_fill_(dim, idx, value)
