"""Activations: ReLU, SiLU, GELU, Tanh, Sigmoid, Softmax, LogSoftmax, LeakyReLU, ELU, Softplus, Hardtanh, ReLU6, GLU,
Mish, Hardswish, Hardsigmoid."""

from __future__ import annotations

import warnings
from typing import Any

from .. import functional as F
from .module import Module


class ReLU(Module):
    """max(x, 0). inplace is accepted and recorded; the result is a new tensor."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SiLU(Module):
    """x * sigmoid(x). inplace is accepted and recorded; the result is a new tensor."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.silu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """x * Phi(x), exactly (approximate="none") or with the tanh approximation (approximate="tanh")."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError("approximate argument must be either none or tanh.")
        self.approximate = approximate

    def forward(self, input: Any) -> Any:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return "approximate=%r" % (self.approximate,)


class _Elementwise(Module):
    """An activation without parameters or arguments: forward applies _fn."""

    _fn = ""

    def forward(self, input: Any) -> Any:
        return getattr(F, self._fn)(input)


class Tanh(_Elementwise):
    """tanh(x)."""

    _fn = "tanh"


class Sigmoid(_Elementwise):
    """1 / (1 + exp(-x))."""

    _fn = "sigmoid"


class _ElementwiseInplace(_Elementwise):
    """An activation that takes inplace, accepted and recorded; the result is a new tensor."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class Mish(_ElementwiseInplace):
    """x * tanh(softplus(x))."""

    _fn = "mish"


class Hardswish(_ElementwiseInplace):
    """x * relu6(x + 3) / 6."""

    _fn = "hardswish"


class Hardsigmoid(_ElementwiseInplace):
    """relu6(x + 3) / 6."""

    _fn = "hardsigmoid"


class _SoftmaxLike(Module):
    """A softmax over dim (None: torch's legacy choice, 0 for 0-, 1- and 3-dimensional inputs, else 1)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def _dim(self, input: Any) -> int:
        if self.dim is not None:
            return self.dim
        warnings.warn("Implicit dimension choice for %s has been deprecated. Change the call to include dim=X as an "
                      "argument." % type(self).__name__.lower(), stacklevel=3)
        return 0 if len(input.shape) in (0, 1, 3) else 1

    def extra_repr(self) -> str:
        return "dim=%s" % (self.dim,)


class Softmax(_SoftmaxLike):
    """exp(x) / sum(exp(x)) over dim."""

    def forward(self, input: Any) -> Any:
        return F.softmax(input, self._dim(input))


class LogSoftmax(_SoftmaxLike):
    """log(softmax(x)) over dim, computed as one operator."""

    def forward(self, input: Any) -> Any:
        return F.log_softmax(input, self._dim(input))


class LeakyReLU(Module):
    """x where x >= 0, negative_slope * x elsewhere."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return "negative_slope=%s%s" % (self.negative_slope, ", inplace=True" if self.inplace else "")


class ELU(Module):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return "alpha=%s%s" % (self.alpha, ", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Any) -> Any:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return "beta=%s, threshold=%s" % (self.beta, self.threshold)


class Hardtanh(Module):
    """x clamped to [min_val, max_val]."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if max_val <= min_val:
            raise ValueError("max_val must be greater than min_val")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return "min_val=%s, max_val=%s%s" % (self.min_val, self.max_val, ", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """x clamped to [0, 6]."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GLU(Module):
    """The first half of the input along dim times the sigmoid of the second half."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return "dim=%s" % (self.dim,)
