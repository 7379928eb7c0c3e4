"""dt[index] and dt[index] = value on distributed tensors (see Tensor.__getitem__ and Tensor.__setitem__).

Basic indexing (ints, slices with steps, None, Ellipsis) is select, slice and unsqueeze: views, which share the tensor's
memory where they keep every shard where it is and follow it otherwise. One long index (a dtorch or torch tensor, or a
list of ints) is index_select; several are combined into one flat index of their dimensions, flattened (torch's rules for
where the indices' dimensions go hold). Assignment writes in place: a basic index is a box each device writes its part of,
a bool mask of the tensor's shape is masked_fill_ (or a where copied back), one 1-D long index is index_copy_ into the
view of the basic items, and several (or one of more dimensions) are index_put_ into it."""

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
        item = _list_index(item)
    mesh = t.device_mesh
    return _from_torch(item, mesh, [Replicate()] * mesh.ndim)


def _list_index(item):
    """A list index as a torch tensor of its values' dtype (an empty list is a long index, as in torch): a list of floats
    is refused as torch refuses it, not truncated."""
    idx = _torch.tensor(item) if len(item) > 0 else _torch.tensor(item, dtype=_torch.int64)
    if idx.dtype.is_floating_point or idx.dtype.is_complex:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return idx


def _is_mask(item):
    """A bool tensor, or a list of bools (torch reads one as a bool tensor)."""
    if type(item) is list:
        return len(item) > 0 and all(type(v) is builtins.bool for v in item)
    return isinstance(item, (_tensor.Tensor, _torch.Tensor)) and item.dtype.name == "bool"


def getitem(t, index):
    """t[index] as a new distributed tensor: one pass over the items, each int a select, each slice that is not whole a
    slice, each None an unsqueeze, one long index an index_select (a decode step's few slices pay for no more than
    that), several long indices one index_select of their combined index."""
    if type(index) is not tuple:
        if _is_mask(index):
            return _getitem_mask(t, index)
        index = (index,)
    elif len(index) == 1 and _is_mask(index[0]):
        return _getitem_mask(t, index[0])
    result, advanced = _basic(t, index)
    if advanced is None:
        return result
    if len(advanced) == 1:
        dim, _, item = advanced[0]
        idx = _index_tensor(t, item)
        idx_shape = list(idx.shape)
        out = _aten("index_select", result, dim, idx.reshape(-1) if len(idx_shape) != 1 else idx)
        return _aten("unflatten", out, dim, idx_shape) if idx_shape else _aten("squeeze", out, dim)
    return _index_many(t, result, advanced)


def _basic(t, index):
    """t indexed by the basic items of the tuple `index` (ints select, slices slice, None unsqueezes), a view of t, with
    each tensor or list index's dimension kept whole; and those indices as (dimension of the view, dimension of t,
    index), or None when there are none."""
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
    advanced = None  # the tensor and list indices, once there is one
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
            # Applied after the basic items, on this dimension kept whole: where the index dimensions go depends on
            # whether the tensor and list indices are adjacent, which only the whole index tells.
            if advanced is None:
                advanced = []
            advanced.append((dim, source, item))
            dim += 1
            source += 1
        else:
            raise TypeError("dtorch.Tensor indices are ints, slices (`:`), ellipsis (`...`), None, long tensors or lists, "
                            "or a bool mask of the tensor's leading dimensions; got %s" % type(item).__name__)
    return result, advanced


def _index_many(t, result, advanced):
    """result[...] with several tensor or list indices, each on a dimension of result ((dim, source dim of t, index)),
    as torch indexes: the indices broadcast together to shape B, and B's dimensions replace the indexed ones where those
    are adjacent, or lead the result where a slice or None stands between them.

    The indexed dimensions are moved to the front and flattened into one, the indices combined into one flat index of
    that dimension, and the rows picked with index_select: dimensions that are not indexed keep their shards, and the
    derivative is index_select's. Indices given as torch tensors or lists are checked and combined in the client, as torch
    checks them; indices held on the devices are combined there, and one out of range makes index_select fail."""
    sizes = [result.shape[d] for d, _, _ in advanced]
    moved, after = _indexed_first(result, advanced)
    flat = _aten("flatten", moved, 0, len(advanced) - 1)
    items = [item for _, _, item in advanced]
    if any(isinstance(item, _tensor.Tensor) for item in items):
        linear = _linear_on_devices(t, items, sizes)
    else:
        linear = _index_tensor(t, _linear_local(items, sizes, [s for _, s, _ in advanced]))
    shape = list(linear.shape)
    out = _aten("index_select", flat, 0, linear.reshape(-1) if len(shape) != 1 else linear)
    out = _aten("unflatten", out, 0, shape) if shape else _aten("squeeze", out, 0)
    if after:
        # Adjacent indices: B goes where the indexed dimensions were, after the first dimensions that are not indexed.
        b = len(shape)
        out = out.permute(list(range(b, b + after)) + list(range(b)) + list(range(b + after, out.ndim)))
    return out


def _indexed_first(view, advanced):
    """view with the dimensions of its tensor or list indices moved to the front (in their order), and the number of
    dimensions torch's result has before the indices' broadcast dimensions: those before the indexed ones where the
    indices are adjacent, none where a slice or None separates them (the broadcast dimensions lead then)."""
    dims = [d for d, _, _ in advanced]
    k = len(dims)
    moved = view if dims == list(range(k)) else view.permute(dims + [d for d in range(view.ndim) if d not in dims])
    adjacent = dims == list(range(dims[0], dims[0] + k))
    return moved, dims[0] if adjacent else 0


def _linear_local(items, sizes, sources):
    """The flat index of several torch tensor or list indices into dimensions of `sizes` (row-major), checked as torch
    checks them: integer dtypes, broadcastable shapes, every value in [-size, size)."""
    indices = []
    for item, size, source in zip(items, sizes, sources):
        idx = item if isinstance(item, _torch.Tensor) else _list_index(item)
        if idx.dtype.is_floating_point or idx.dtype.name == "bool" or idx.dtype.is_complex:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        idx = idx.to(_torch.int64)
        if idx.numel() > 0:
            low, high = int(idx.min()), int(idx.max())
            if low < -size or high >= size:
                raise IndexError("index %d is out of bounds for dimension %d with size %d"
                                 % (low if low < -size else high, source, size))
        indices.append(idx % size if size > 0 else idx)
    _broadcast_shape([list(idx.shape) for idx in indices])
    linear = None
    for idx, size in zip(indices, sizes):
        linear = idx if linear is None else linear * size + idx
    return linear


def _linear_on_devices(t, items, sizes):
    """The flat index of several indices, some held on the devices: computed there, replicated like the indices. An
    index out of [-size, size) makes the flat index -1, which index_select refuses."""
    indices = [_index_tensor(t, item) for item in items]
    _broadcast_shape([list(idx.shape) for idx in indices])
    linear = None
    bad = None
    for idx, size in zip(indices, sizes):
        if idx.dtype.name != "int64":
            idx = idx.to(_torch.int64)
        out = (idx < -size) | (idx >= size)
        bad = out if bad is None else bad | out
        idx = idx % size if size > 0 else idx
        linear = idx if linear is None else linear * size + idx
    return _aten("where", bad, -1, linear)


def _getitem_mask(t, mask):
    """t[mask] for a bool mask of t's leading dimensions (a dtorch or torch tensor; a torch one is replicated on t's mesh).

    The result's first size is the mask's number of True elements, which only the values tell: this blocks to read it
    (a synchronization point, as boolean indexing of a CUDA tensor is in torch). Where t is sharded only on dimensions the
    mask does not cover, every device selects from its own shard and those shards stay; otherwise t is replicated first,
    with a warning once naming that communication."""
    from ._bridge import bridge, call
    from ._tensor import Tensor
    if type(mask) is list:
        mask = _torch.tensor(mask)
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
    is true; long indices (tensors or lists) among basic items write those positions (index_copy_, index_put_)."""
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
    advanced = False
    for item in items:
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
            advanced = True  # found again, with its dimension, by _basic below
        else:
            raise TypeError("dtorch.Tensor indices are ints, slices (`:`), ellipsis (`...`), None, long tensors or lists, "
                            "or a bool mask of the tensor's shape; got %s" % type(item).__name__)
    if not advanced:
        # One string for Java to read in one call (PyBridge.setItem says how it is written).
        _bridge.call(_bridge.bridge().setItem, t._java, ";".join(spec), value._java if value_is_tensor else number, kind)
        return
    # The box of the basic items, with the indexed dimensions whole: a view of t, which writes into t.
    view, found = _basic(t, items)
    if len(found) == 1:
        dim, _, item = found[0]
        idx = _index_tensor(t, item)
        if idx.ndim == 1:
            # One 1-D index: index_copy_ (index_fill_) along its dimension, which keeps every shard where it is.
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
            return
    _put_many(t, view, found, value if value_is_tensor else None, number)


def _broadcast_shape(shapes):
    """The shape the given shapes broadcast to, or IndexError as torch's indexing gives."""
    out = []
    for shape in shapes:
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        for i, size in enumerate(shape, len(out) - len(shape)):
            if out[i] == 1:
                out[i] = size
            elif size != 1 and size != out[i]:
                raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes %s"
                                 % " ".join(str(list(s)) for s in shapes))
    return out


def _put_many(t, view, advanced, value, number):
    """view[indices] = value (or the number) for tensor or list indices on dimensions of view, a view of t: index_put_ on
    the view with the indexed dimensions moved to the front, and the value moved alike from where t[index] puts the
    indices' dimensions."""
    indices = []
    for _, _, item in advanced:
        idx = _index_tensor(t, item)
        indices.append(idx if idx.dtype.name in ("int64", "int32") else idx.to(_torch.int64))
    broadcast = _broadcast_shape([list(i.shape) for i in indices])
    moved, after = _indexed_first(view, advanced)
    if value is None:
        src = _value_tensor(t, _torch.tensor(number, dtype=view.dtype))
    else:
        src = value if value.dtype == view.dtype else value.to(view.dtype)
        if after:
            # Adjacent indices: t[index] has the indices' dimensions after the first `after` ones; index_put_ on the
            # moved view wants them in front.
            b = len(broadcast)
            rest = list(moved.shape)[len(advanced):]
            laid = rest[:after] + broadcast + rest[after:]
            while src.ndim > len(laid) and src.shape[0] == 1:
                src = _aten("squeeze", src, 0)
            if list(src.shape) != laid:
                src = _aten("expand", src, laid)
            src = src.permute(list(range(after, after + b)) + list(range(after)) + list(range(after + b, len(laid))))
    _tensor.aten("index_put_", (moved, indices, src))
