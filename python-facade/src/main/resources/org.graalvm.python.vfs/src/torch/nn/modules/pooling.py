"""Pooling: MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d,
AdaptiveMaxPool2d, each calling its torch.nn.functional function with the module's settings."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module


class _Window(Module):
    """The settings every windowed pooling layer has: stride None is the kernel size, as in PyTorch."""

    def __init__(self, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode


class _MaxPool(_Window):
    _fn = ""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation = dilation
        self.return_indices = return_indices

    def forward(self, input: Any) -> Any:
        return getattr(F, self._fn)(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                    ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s" % (
            self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class MaxPool1d(_MaxPool):
    """The maximum over windows of the last dimension of (N, C, L) or (C, L) inputs."""

    _fn = "max_pool1d"


class MaxPool2d(_MaxPool):
    """The maximum over windows of the last two dimensions of (N, C, H, W) or (C, H, W) inputs."""

    _fn = "max_pool2d"


class _AvgPool(_Window):
    def __init__(self, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = count_include_pad

    def extra_repr(self) -> str:
        return "kernel_size=%s, stride=%s, padding=%s" % (self.kernel_size, self.stride, self.padding)


class AvgPool1d(_AvgPool):
    """The mean over windows of the last dimension of (N, C, L) or (C, L) inputs."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def forward(self, input: Any) -> Any:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AvgPool2d(_AvgPool):
    """The mean over windows of the last two dimensions of (N, C, H, W) or (C, H, W) inputs."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input: Any) -> Any:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)


class _AdaptivePool(Module):
    _fn = ""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Any) -> Any:
        if self._fn.startswith("adaptive_max"):
            return getattr(F, self._fn)(input, self.output_size, self.return_indices)
        return getattr(F, self._fn)(input, self.output_size)

    def extra_repr(self) -> str:
        return "output_size=%s" % (self.output_size,)


class _AdaptiveAvgPool(_AdaptivePool):
    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    """The mean over output_size windows that tile the last dimension."""

    _fn = "adaptive_avg_pool1d"


class AdaptiveAvgPool2d(_AdaptiveAvgPool):
    """The mean over output_size windows that tile the last two dimensions (None keeps that size)."""

    _fn = "adaptive_avg_pool2d"


class AdaptiveMaxPool1d(_AdaptivePool):
    """The maximum over output_size windows that tile the last dimension."""

    _fn = "adaptive_max_pool1d"


class AdaptiveMaxPool2d(_AdaptivePool):
    """The maximum over output_size windows that tile the last two dimensions (None keeps that size)."""

    _fn = "adaptive_max_pool2d"
