"""dtorch.nn.functional: torch.nn.functional's names on distributed tensors. The hand-written operators (relu, silu,
gelu) keep their own sharding rules; any other name is the ATen operator of that name through the generic path
(dtorch.aten), e.g. linear, layer_norm, group_norm, hardtanh, leaky_relu, elu, softplus, mish, logsigmoid. The functions
below take torch's signatures where they differ from the operator's (the arguments are read by torch.nn.functional's own
helpers; pooling and interpolate are bound by torch.nn._spatial, as torch.nn.functional's are), and convolutions and
scaled_dot_product_attention name torch's signatures."""

from __future__ import annotations

import math
from typing import Any, Sequence

from torch.nn import _spatial

from .. import _bridge, _tensor
from ..distributed_spec import Partial, Replicate, Shard, _specs
import torch as _torch
from torch.nn import functional as _F


def relu(input: _tensor.Tensor, inplace: bool = False) -> _tensor.Tensor:
    return input.relu()


def silu(input: _tensor.Tensor, inplace: bool = False) -> _tensor.Tensor:
    return input.silu()


def gelu(input: _tensor.Tensor, approximate: str = "none") -> _tensor.Tensor:
    if approximate == "none":
        return input.gelu()
    return _tensor.aten("gelu", (input,), {"approximate": approximate})


def softmax(*args: Any, **kwargs: Any) -> _tensor.Tensor:
    """softmax(input, dim=None, _stacklevel=3, dtype=None): gathers dim where it is sharded, keeps other shards."""
    return _tensor.aten("softmax", _F._softmax_args(*args, **kwargs))


def log_softmax(*args: Any, **kwargs: Any) -> _tensor.Tensor:
    """log_softmax(input, dim=None, _stacklevel=3, dtype=None)"""
    return _tensor.aten("log_softmax", _F._softmax_args(*args, **kwargs))


def embedding(*args: Any, **kwargs: Any) -> _tensor.Tensor:
    """embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False)"""
    return _tensor.aten("embedding", _F._embedding_args(*args, **kwargs))


def batch_norm(*args: Any, **kwargs: Any) -> _tensor.Tensor:
    """batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5);
    training=True needs running_mean and running_var None (they would be updated in place)."""
    return _tensor.aten("batch_norm", _F._batch_norm_args(*args, **kwargs))


def rms_norm(*args: Any, **kwargs: Any) -> _tensor.Tensor:
    """rms_norm(input, normalized_shape, weight=None, eps=None)"""
    return _tensor.aten("rms_norm", _F._rms_norm_args(*args, **kwargs))


def dropout(*args: Any, **kwargs: Any) -> _tensor.Tensor:
    """dropout(input, p=0.5, training=True, inplace=False). In evaluation (training=False) the identity. In training the
    mask is drawn like dtorch.rand (seeded by dtorch.manual_seed, one seed per call): the same global mask whatever the
    mesh and placements, so replicas agree and shards are slices of it, but not the mask torch draws on one device.
    The result is input * (mask / (1 - p)), as torch computes it; inplace is ignored (torch's own is not in place here)."""
    input, p, training = _F._dropout_args(*args, **kwargs)
    if not training or p == 0.0:
        return _tensor.aten("dropout", (input, p, False))
    if p == 1.0:
        return input * 0.0
    placements = [Replicate() if isinstance(q, Partial) else q for q in input.placements]
    kept = _tensor.rand(*input.shape, device_mesh=input.device_mesh, placements=placements).ge(p)
    return input * (kept.to(input.dtype) / (1.0 - p))


def _run(name, args, kwargs=None):
    return _tensor.aten(name, args, kwargs)


def conv1d(input: _tensor.Tensor, weight: _tensor.Tensor, bias: _tensor.Tensor | None = None, stride: int | Sequence[int] = 1,
           padding: int | str | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1) -> _tensor.Tensor:
    return _run("conv1d", (input, weight, bias, stride, padding, dilation, groups))


def conv2d(input: _tensor.Tensor, weight: _tensor.Tensor, bias: _tensor.Tensor | None = None, stride: int | Sequence[int] = 1,
           padding: int | str | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1) -> _tensor.Tensor:
    """torch's conv2d on distributed tensors. An input sharded on its height (Shard(2)) keeps that shard where the output
    height is the input's (stride 1 and padding dilation * (kernel - 1) / 2 in height): each device gets the rows it
    needs from its neighbours (a halo exchange) instead of the whole input."""
    return _run("conv2d", (input, weight, bias, stride, padding, dilation, groups))


globals().update(_spatial.bind(_run))


def scaled_dot_product_attention(query: _tensor.Tensor, key: _tensor.Tensor, value: _tensor.Tensor,
                                 attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False, strategy: str | None = None) -> _tensor.Tensor:
    """torch's attention on distributed tensors, with torch's semantics: attn_mask boolean (True takes part) or
    additive float, broadcastable to the scores [..., H, L, S], a dtorch.Tensor or a plain torch.Tensor (then
    replicated on the query's mesh); is_causal top-left aligned, not with a mask (as torch documents); enable_gqa lets key and value have fewer heads than the query, a divisor of its; a row whose every key is
    masked gives zeros, as torch gives. dropout_p must be 0.

    Without `strategy` it runs sharded on batch or heads (query, key and value alike) and gathers a sharded sequence
    first. strategy="ulysses" keeps a sequence-sharded input's communication to all-to-alls: query, key, value (and a
    mask that holds the sequence rows) move from their sequence shards to head shards, each device attends its heads
    over the whole sequence, and the output moves back to the query's sequence shards (DeepSpeed-Ulysses); the heads
    must divide over those devices, and with enable_gqa a device gets whole query groups: key and value heads fewer than
    the devices, or not dividing over them, are first repeated to the least common multiple of their number and the
    devices (it divides the query heads). strategy="ring" keeps every device's query rows and rotates key and value
    blocks around the devices that shard the sequence, merging by log-sum-exp (ring attention); the blocks may differ in
    length or be empty (a sequence that does not divide over the ring, or is shorter than it); the mask is held for
    each device's query rows and every key, and the causal rule compares global positions; with enable_gqa the smaller
    key and value rotate. strategy="usp" combines them (unified sequence parallelism): the sequence shards of the mesh
    dimensions named "ulysses" (else of the innermost one that shards it) move to head shards, the ring runs over the
    others, and the output moves back. Key and value move to the query's placements first. Every strategy runs the plain
    operator when the query's sequence is not sharded. The result equals single-device attention and is sharded like
    the query."""
    if strategy not in (None, "ulysses", "ring", "usp"):
        raise ValueError("scaled_dot_product_attention: strategy must be None, 'ulysses', 'ring' or 'usp', got %r"
                         % (strategy,))
    if strategy is not None and attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention(strategy=%r): an explicit attn_mask should not be set when "
                         "is_causal=True, as torch documents; fold the causal rule into the mask" % (strategy,))
    mask, owned = _distributed_mask(query, attn_mask)
    try:
        args = (query, key, value, mask, float(dropout_p), is_causal)
        kwargs = {"scale": scale, "enable_gqa": enable_gqa}
        if strategy is None:
            return _run("scaled_dot_product_attention", args, kwargs)
        if strategy == "ring":
            return _ring_attention(args, kwargs)
        return _ulysses_attention(args, kwargs, strategy)
    finally:
        if owned:
            mask.close()


def _distributed_mask(query, mask):
    """The mask as a dtorch.Tensor on the query's mesh, and whether it was made here: a plain torch.Tensor is
    replicated on every device."""
    if isinstance(mask, _torch.Tensor) and isinstance(query, _tensor.Tensor):
        mesh = query.device_mesh
        return _tensor.Tensor(mask, device_mesh=mesh, placements=[Replicate()] * mesh.ndim), True
    return mask, False


def _check_tensors(strategy, tensors):
    for t in tensors:
        if not isinstance(t, _tensor.Tensor):
            raise TypeError("scaled_dot_product_attention(strategy=%r) takes dtorch.Tensors, got %r" % (strategy, t))


def _check_no_dropout(strategy, args):
    if args[4] != 0.0:
        raise ValueError("scaled_dot_product_attention(strategy=%r) takes no dropout_p (each device would draw its own "
                         "dropout mask); use dropout_p=0" % (strategy,))


def _ring_scale(kwargs):
    return float("nan") if kwargs["scale"] is None else float(kwargs["scale"])


def _ring_attention(args, kwargs):
    query, key, value, mask = args[:4]
    _check_tensors("ring", (query, key, value) + ((mask,) if mask is not None else ()))
    _check_no_dropout("ring", args)
    if query.ndim < 2 or not any(p.is_shard(query.ndim - 2) for p in query.placements):
        return _run("scaled_dot_product_attention", args, kwargs)
    return _tensor.Tensor(_bridge.call(_tensor._b().ringAttention, query._java, key._java, value._java,
                                       None if mask is None else mask._java, bool(args[5]), _ring_scale(kwargs),
                                       bool(kwargs["enable_gqa"])))


def _ulysses_dims(mesh, sharded):
    """The mesh dimensions of `sharded` that strategy="usp" turns into head shards: those named "ulysses", else the
    innermost; the others ring."""
    names = mesh.mesh_dim_names or ()
    named = [m for m in sharded if m < len(names) and names[m] == "ulysses"]
    return named or sharded[-1:]


def _grouped_heads(query, key, ways, enable_gqa):
    """How many times each key/value head is repeated so that `ways` devices each get whole query groups: 1 when the
    key heads divide over them, else lcm(key heads, ways) / key heads (that lcm divides the query heads, which divide
    over the devices)."""
    heads = query.ndim - 3
    q_heads, kv_heads = query.shape[heads], key.shape[heads]
    if not enable_gqa or kv_heads == q_heads or kv_heads == 0 or q_heads % kv_heads:
        return 1
    lcm = kv_heads * ways // math.gcd(kv_heads, ways)
    return lcm // kv_heads


def _repeat_heads(t, times):
    """t with every head (dimension ndim - 3) repeated `times` times in place (h -> h // times, as torch's enable_gqa
    reads them), keeping t's placements: expand a new dimension beside the heads and fold it in."""
    heads = t.ndim - 3
    shape = list(t.shape)
    wide = shape[:heads + 1] + [times] + shape[heads + 1:]
    folded = shape[:heads] + [shape[heads] * times] + shape[heads + 1:]
    grown = t.unsqueeze(heads + 1)
    try:
        spread = grown.expand(*wide)
        try:
            return spread.reshape(*folded)
        finally:
            spread.close()
    finally:
        grown.close()


def _ulysses_attention(args, kwargs, strategy):
    query, key, value, mask = args[:4]
    _check_tensors(strategy, (query, key, value) + ((mask,) if mask is not None else ()))
    if query.ndim < 4:
        raise ValueError("scaled_dot_product_attention(strategy=%r) needs [..., heads, sequence, dim] inputs, got "
                         "a query of shape %s" % (strategy, tuple(query.shape)))
    mesh, placements = query.device_mesh, list(query.placements)
    for name, t in (("key", key), ("value", value)):
        if t.ndim != query.ndim or t.device_mesh != mesh or list(t.placements) != placements:
            raise ValueError("scaled_dot_product_attention(strategy=%r): %s must have the query's number of "
                             "dimensions, mesh and placements %s, got %s on %r" % (strategy, name, placements,
                                                                                  list(t.placements), t.device_mesh))
    _check_no_dropout(strategy, args)
    seq, heads = query.ndim - 2, query.ndim - 3
    sharded = [m for m, p in enumerate(placements) if p.is_shard(seq) or p.is_shard(seq - query.ndim)]
    moved = sharded if strategy == "ulysses" else _ulysses_dims(mesh, sharded)
    # On head shards: the plain operator (every device holds whole sequences) or, for "usp", the ring over what is left.
    attend = _run if strategy == "ulysses" else lambda _, a, k: _ring_attention(a, k)
    if not moved:
        return attend("scaled_dot_product_attention", args, kwargs)
    ways = 1
    for m in moved:
        ways *= mesh.shape[m]
    times = _grouped_heads(query, key, ways, kwargs["enable_gqa"])
    if key.shape[heads] != query.shape[heads]:
        # Grouped heads: whole query groups per device need both head counts to divide over the devices.
        for name, t, n in (("query", query, 1), ("key", key, times), ("value", value, times)):
            if t.shape[heads] * n % ways:
                raise ValueError("scaled_dot_product_attention(strategy=%r, enable_gqa=True): the %s's %d heads do not "
                                 "divide over the %d devices its sequence is moved from" % (strategy, name, t.shape[heads], ways))
    to_heads = [Shard(heads) if m in moved else p for m, p in enumerate(placements)]
    # Repeating heads is local to each device (their sequence shards stay); the ring is checked on what it will get.
    grouped = [_repeat_heads(t, times) if times > 1 else t for t in (key, value)]
    try:
        if strategy == "usp" and len(moved) < len(sharded):
            _bridge.call(_tensor._b().checkRingAttention, query._java, grouped[0]._java, grouped[1]._java,
                         None if mask is None else mask._java, bool(args[5]), _ring_scale(kwargs),
                         bool(kwargs["enable_gqa"]), mesh._java, _specs(to_heads, query.ndim))
        by_heads = [t.redistribute(mesh, to_heads) for t in [query] + grouped]
    finally:
        for t in grouped:
            if t is not key and t is not value:
                t.close()
    try:
        out = attend("scaled_dot_product_attention", tuple(by_heads) + args[3:], kwargs)
    finally:
        for t in by_heads:
            t.close()
    try:
        return out.redistribute(mesh, placements)
    finally:
        out.close()


def __getattr__(name):
    if name.startswith("_") or not _tensor._has_op(name):
        raise AttributeError("module 'dtorch.nn.functional' has no attribute %r" % (name,))

    def function(*args, **kwargs):
        return _tensor.aten(name, args, kwargs)

    function.__name__ = name
    return function
