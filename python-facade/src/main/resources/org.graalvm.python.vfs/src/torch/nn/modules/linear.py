"""Linear and Identity."""

from __future__ import annotations

import math
from typing import Any

from ... import _factories
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def factory_kwargs(device: Any, dtype: Any) -> dict[str, Any]:
    """The device and dtype a layer makes its parameters with (float32 on the CPU by default)."""
    kwargs = {}
    if device is not None:
        kwargs["device"] = device
    if dtype is not None:
        kwargs["dtype"] = dtype
    return kwargs


def empty_parameter(*shape: int, device: Any = None, dtype: Any = None) -> Parameter:
    return Parameter(_factories.empty(*shape, **factory_kwargs(device, dtype)))


class Identity(Module):
    """Returns its input; takes and ignores any arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class Linear(Module):
    """y = x @ weight.T + bias, with weight of shape (out_features, in_features) and bias (out_features,), both drawn
    from U(-1/sqrt(in_features), 1/sqrt(in_features)) as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = empty_parameter(out_features, in_features, device=device, dtype=dtype)
        if bias:
            self.bias = empty_parameter(out_features, device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_ with a = sqrt(5) gives the bound 1/sqrt(fan_in), which the bias shares.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Any) -> Any:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return "in_features=%s, out_features=%s, bias=%s" % (self.in_features, self.out_features, self.bias is not None)
