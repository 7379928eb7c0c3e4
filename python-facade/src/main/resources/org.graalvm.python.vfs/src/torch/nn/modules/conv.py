"""Conv2d."""

from __future__ import annotations

import math
from typing import Any

from .. import functional as F
from .. import init
from .linear import empty_parameter
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError("expected 2 values, got %r" % (value,))
        return tuple(value)
    return (value, value)


class Conv2d(Module):
    """A 2-D convolution of (N, C_in, H, W) inputs: weight (out_channels, in_channels / groups, kH, kW) and bias
    (out_channels,), both drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as in PyTorch. padding is a number, a pair,
    "valid" or "same"; padding_mode "zeros", "reflect", "replicate" or "circular"."""

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
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.dilation = _pair(dilation)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError("Invalid padding string %r, should be one of ('valid', 'same')" % padding)
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _pair(padding)
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = (0, 0)
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
            return [0, 0, 0, 0]
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

    def forward(self, input: Any) -> Any:
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return F.conv2d(padded, self.weight, self.bias, self.stride, (0, 0), self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = "%s, %s, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels, self.kernel_size, self.stride)
        if self.padding != (0, 0):
            s += ", padding=%s" % (self.padding,)
        if self.dilation != (1, 1):
            s += ", dilation=%s" % (self.dilation,)
        if self.groups != 1:
            s += ", groups=%s" % self.groups
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode=%s" % self.padding_mode
        return s
