"""Conv1d, Conv2d and Conv3d."""

from __future__ import annotations

import math
from typing import Any

from .. import functional as F
from .. import init
from .linear import empty_parameter
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(n: int, value: Any) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError("expected %d values, got %r" % (n, value))
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """A convolution over the last _n dimensions: weight (out_channels, in_channels / groups, *kernel_size) and bias
    (out_channels,), both drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as in PyTorch. padding is a number, one per
    dimension, "valid" or "same"; padding_mode "zeros", "reflect", "replicate" or "circular"."""

    _n = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError("padding_mode must be one of %s, but got padding_mode='%s'" % (list(_PADDING_MODES),
                                                                                            padding_mode))
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(self._n, kernel_size)
        self.stride = _tuple(self._n, stride)
        self.dilation = _tuple(self._n, dilation)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError("Invalid padding string %r, should be one of ('valid', 'same')" % padding)
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(self._n, padding)
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = (0,) * self._n
        self.transposed = False
        self._reversed_padding_repeated_twice = self._reversed_padding()
        self.weight = empty_parameter(out_channels, in_channels // groups, *self.kernel_size, device=device, dtype=dtype)
        if bias:
            self.bias = empty_parameter(out_channels, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _reversed_padding(self) -> list[int]:
        """The padding F.pad takes for a padding_mode other than zeros: last dimension first, both sides."""
        if self.padding == "valid":
            return [0, 0] * self._n
        if self.padding == "same":
            out = []
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                left = total // 2
                out += [left, total - left]
            return out
        return [p for p in reversed(self.padding) for _ in range(2)]

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _conv(self, *args: Any) -> Any:
        return getattr(F, "conv%dd" % self._n)(*args)

    def forward(self, input: Any) -> Any:
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._conv(padded, self.weight, self.bias, self.stride, (0,) * self._n, self.dilation, self.groups)
        return self._conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = "%s, %s, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels, self.kernel_size, self.stride)
        if self.padding != (0,) * self._n:
            s += ", padding=%s" % (self.padding,)
        if self.dilation != (1,) * self._n:
            s += ", dilation=%s" % (self.dilation,)
        if self.groups != 1:
            s += ", groups=%s" % self.groups
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode=%s" % self.padding_mode
        return s


class Conv1d(_ConvNd):
    """A 1-D convolution of (N, C_in, L) or (C_in, L) inputs."""

    _n = 1


class Conv2d(_ConvNd):
    """A 2-D convolution of (N, C_in, H, W) or (C_in, H, W) inputs."""

    _n = 2


class Conv3d(_ConvNd):
    """A 3-D convolution of (N, C_in, D, H, W) or (C_in, D, H, W) inputs."""

    _n = 3
