"""torch.nn.init: PyTorch's initialisations, in place, with its names, arguments and bounds.

On a torch.Tensor they run libtorch's in-place operators (uniform_, normal_, fill_, erfinv_, ...), seeded by
torch.manual_seed. On a distributed tensor (dtorch.Tensor) the random draws are dtorch's seeded factories (rand_like,
randn_like, seeded by dtorch.manual_seed), so every device draws its part of one tensor and replicas agree; the rest are
the same in-place operators. generator= is not supported (libtorch's default generator is the one used). They record
nothing for autograd (they write into parameters, which require grad).
"""

from __future__ import annotations

import math
from typing import Any

from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from .parameter import is_distributed

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear, convolutions and sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + slope^2)) for leaky_relu (slope param, 0.01 by default), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError("negative_slope %s not a valid number" % param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError("Unsupported nonlinearity %s" % nonlinearity)


def _no_generator(generator: Any) -> None:
    if generator is not None:
        raise NotImplementedError("generator= is not supported: initialisations draw from the default generator "
                                  "(torch.manual_seed)")


def _check(tensor: Any, name: str) -> None:
    if not (isinstance(tensor, Tensor) or is_distributed(tensor)):
        raise TypeError("%s() takes a torch.Tensor or a dtorch.Tensor, got %r" % (name, type(tensor).__name__))


def _dtorch() -> Any:
    import dtorch
    return dtorch


@no_grad()
def uniform_(tensor: Any, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Any:
    """Values drawn uniformly from [a, b)."""
    _check(tensor, "uniform_")
    _no_generator(generator)
    if is_distributed(tensor):
        return tensor.copy_(_dtorch().rand_like(tensor) * (b - a) + a)
    return tensor.uniform_(a, b)


@no_grad()
def normal_(tensor: Any, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
    """Values drawn from the normal distribution N(mean, std^2)."""
    _check(tensor, "normal_")
    _no_generator(generator)
    if is_distributed(tensor):
        return tensor.copy_(_dtorch().randn_like(tensor) * std + mean)
    return tensor.normal_(mean, std)


@no_grad()
def trunc_normal_(tensor: Any, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: Any = None) -> Any:
    """Values drawn from N(mean, std^2) restricted to [a, b]: uniform draws between the normal CDF's values at a and b,
    mapped back through the inverse CDF (erfinv)."""
    _check(tensor, "trunc_normal_")

    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    low, high = cdf((a - mean) / std), cdf((b - mean) / std)
    uniform_(tensor, 2 * low - 1, 2 * high - 1, generator)
    tensor.erfinv_()
    tensor.mul_(std * math.sqrt(2.0))
    tensor.add_(mean)
    tensor.clamp_(a, b)
    return tensor


@no_grad()
def constant_(tensor: Any, val: float) -> Any:
    """Every value `val`."""
    _check(tensor, "constant_")
    if is_distributed(tensor):
        return tensor.copy_(_dtorch().full_like(tensor, val))
    return tensor.fill_(val)


def ones_(tensor: Any) -> Any:
    return constant_(tensor, 1.0)


def zeros_(tensor: Any) -> Any:
    return constant_(tensor, 0.0)


@no_grad()
def eye_(tensor: Any) -> Any:
    """The identity matrix (a 2-dimensional tensor)."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from .._factories import eye
    rows, columns = tensor.shape
    identity = eye(rows, columns, dtype=tensor.dtype)
    if is_distributed(tensor):
        identity = _dtorch().distribute_tensor(identity, tensor.device_mesh, tensor.placements)
    return tensor.copy_(identity)


def _calculate_fan_in_and_fan_out(tensor: Any) -> tuple[int, int]:
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in shape[2:]:
        receptive *= s
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor: Any, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError("Mode %s not supported, please use one of fan_in, fan_out" % mode)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _empty(tensor: Any) -> bool:
    return 0 in tuple(tensor.shape)


def xavier_uniform_(tensor: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Any, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Any = None) -> Any:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He), gain = calculate_gain(nonlinearity, a)."""
    if _empty(tensor):
        return tensor  # nothing to draw (PyTorch warns)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Any, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Any = None) -> Any:
    """N(0, std^2) with std = gain / sqrt(fan) (He), gain = calculate_gain(nonlinearity, a)."""
    if _empty(tensor):
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)

