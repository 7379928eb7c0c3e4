"""Activations: ReLU, SiLU, GELU."""

from __future__ import annotations

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
