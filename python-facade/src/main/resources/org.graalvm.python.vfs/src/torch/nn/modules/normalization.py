"""LayerNorm, RMSNorm and GroupNorm: weight ones, bias zeros, as in PyTorch."""

from __future__ import annotations

import numbers
from typing import Any

from .. import functional as F
from .. import init
from .linear import empty_parameter
from .module import Module


def _normalized_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(shape)


class LayerNorm(Module):
    """Normalizes over the last len(normalized_shape) dimensions: (x - mean) / sqrt(var + eps) * weight + bias."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = empty_parameter(*self.normalized_shape, device=device, dtype=dtype)
            if bias:
                self.bias = empty_parameter(*self.normalized_shape, device=device, dtype=dtype)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Any) -> Any:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps, self.elementwise_affine)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last len(normalized_shape) dimensions; eps None is the dtype's
    machine epsilon, as in PyTorch."""

    def __init__(self, normalized_shape: Any, eps: float | None = None, elementwise_affine: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = empty_parameter(*self.normalized_shape, device=device, dtype=dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input: Any) -> Any:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return "%s, eps=%s, elementwise_affine=%s" % (self.normalized_shape, self.eps, self.elementwise_affine)


class GroupNorm(Module):
    """Normalizes (N, C, ...) inputs over groups of C / num_groups channels, then scales and shifts per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = empty_parameter(num_channels, device=device, dtype=dtype)
            self.bias = empty_parameter(num_channels, device=device, dtype=dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input: Any) -> Any:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "%s, %s, eps=%s, affine=%s" % (self.num_groups, self.num_channels, self.eps, self.affine)
