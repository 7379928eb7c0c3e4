"""torch.nn.functional: PyTorch's names and signatures over the aten operators. Where the names and argument orders
agree with an aten operator the operator is used as is (relu, gelu, silu, softmax, layer_norm, conv2d, linear,
scaled_dot_product_attention, ... and any other aten name through __getattr__); the functions below are those whose
signature differs from the operator's. Every function takes distributed tensors (dtorch.Tensor) too: the operators
hand them to dtorch (__torch_function__, see torch._dispatch), and so do the wrappers, through the operators they
call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _dispatch
from .._dispatch import require
from . import _spatial

if TYPE_CHECKING:
    from .._tensor import Tensor

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """The reduction that the deprecated size_average and reduce arguments name where either is given, as in torch."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else "mean" if size_average else "sum"


def _reduction(reduction, size_average=None, reduce=None):
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS:
        raise ValueError("%r is not a valid value for reduction (none, mean or sum)" % (reduction,))
    return _REDUCTIONS[reduction]


relu = require("relu")
silu = require("silu")
gelu = require("gelu")
linear = require("linear")
layer_norm = require("layer_norm")
group_norm = require("group_norm")
conv1d = require("conv1d")
conv2d = require("conv2d")
conv3d = require("conv3d")
scaled_dot_product_attention = require("scaled_dot_product_attention")
pad = require("pad")
one_hot = require("one_hot")
hardtanh = require("hardtanh")
elu = require("elu")
leaky_relu = require("leaky_relu")
softplus = require("softplus")
glu = require("glu")
cosine_similarity = require("cosine_similarity")
pairwise_distance = require("pairwise_distance")
pixel_shuffle = require("pixel_shuffle")
tanh = require("tanh")
sigmoid = require("sigmoid")
_softmax = require("softmax")
_log_softmax = require("log_softmax")
_embedding = require("embedding")
_dropout = require("dropout")
_batch_norm = require("batch_norm")
_rms_norm = require("rms_norm")
_mse_loss = require("mse_loss")
_l1_loss = require("l1_loss")
_cross_entropy = require("cross_entropy_loss")
_nll_loss = require("nll_loss_nd")
_binary_cross_entropy_with_logits = require("binary_cross_entropy_with_logits")
_normalize_norm = require("norm")
_clamp_min = require("clamp_min")


def _softmax_args(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("softmax() needs dim (implicit dimension choice is deprecated in PyTorch and not supported)")
    return input, dim, dtype


def softmax(*args: Any, **kwargs: Any) -> Tensor:
    """softmax(input, dim=None, _stacklevel=3, dtype=None)"""
    return _softmax(*_softmax_args(*args, **kwargs))


def log_softmax(*args: Any, **kwargs: Any) -> Tensor:
    """log_softmax(input, dim=None, _stacklevel=3, dtype=None)"""
    return _log_softmax(*_softmax_args(*args, **kwargs))


def _embedding_args(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise NotImplementedError("embedding(max_norm=...) is not supported yet")
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += weight.shape[0]
    return weight, input, padding_idx, scale_grad_by_freq, sparse


def embedding(*args: Any, **kwargs: Any) -> Tensor:
    """embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False)"""
    return _embedding(*_embedding_args(*args, **kwargs))


def _dropout_args(input, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
    return input, float(p), training


def dropout(*args: Any, **kwargs: Any) -> Tensor:
    """dropout(input, p=0.5, training=True, inplace=False). A distributed input runs dtorch's dropout, whose mask
    the devices agree on."""
    if args and type(args[0]) is not _dispatch.Tensor:
        result = _dispatch.torch_function(dropout, args, kwargs)
        if result is not NotImplemented:
            return result
    return _dropout(*_dropout_args(*args, **kwargs))


def _batch_norm_args(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    return input, weight, bias, running_mean, running_var, training, momentum, eps, False


def batch_norm(*args: Any, **kwargs: Any) -> Tensor:
    """batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5)"""
    return _batch_norm(*_batch_norm_args(*args, **kwargs))


def _rms_norm_args(input, normalized_shape, weight=None, eps=None):
    return input, list(normalized_shape), weight, eps


def rms_norm(*args: Any, **kwargs: Any) -> Tensor:
    """rms_norm(input, normalized_shape, weight=None, eps=None)"""
    return _rms_norm(*_rms_norm_args(*args, **kwargs))


def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    return _mse_loss(input, target, _reduction(reduction, size_average, reduce))


def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    return _l1_loss(input, target, _reduction(reduction, size_average, reduce))


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    return _cross_entropy(input, target, weight, _reduction(reduction, size_average, reduce), ignore_index, label_smoothing)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None, ignore_index: int = -100,
             reduce: Any = None, reduction: str = "mean") -> Tensor:
    return _nll_loss(input, target, weight, _reduction(reduction, size_average, reduce), ignore_index)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                                     reduce: Any = None, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    return _binary_cross_entropy_with_logits(input, target, weight, pos_weight,
                                             _reduction(reduction, size_average, reduce))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    norm = _normalize_norm(input, p, [dim], True)
    return input / _clamp_min(norm, eps).expand_as(input)


def _run(name, args):
    return require(name)(*args)


globals().update(_spatial.bind(_run))


def __getattr__(name):
    op = _dispatch.op(name)
    if op is None:
        raise AttributeError("module 'torch.nn.functional' has no attribute %r" % name)
    globals()[name] = op
    return op
