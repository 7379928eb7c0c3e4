"""Dropout."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module


class Dropout(Module):
    """In training, zeroes each element with probability p and scales the others by 1 / (1 - p); in evaluation
    (module.eval()), the identity."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
        self.p = p
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return "p=%s, inplace=%s" % (self.p, self.inplace)
