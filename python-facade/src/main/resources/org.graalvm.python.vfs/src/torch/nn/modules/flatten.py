"""Flatten and Unflatten."""

from __future__ import annotations

from typing import Any

from .module import Module


class Flatten(Module):
    """Flattens dimensions start_dim through end_dim into one, as Tensor.flatten does."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Any) -> Any:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return "start_dim=%s, end_dim=%s" % (self.start_dim, self.end_dim)


class Unflatten(Module):
    """Splits dimension dim into unflattened_size, as Tensor.unflatten does."""

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be tuple of ints, but found type %s" % type(unflattened_size).__name__)
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Any) -> Any:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return "dim=%s, unflattened_size=%s" % (self.dim, self.unflattened_size)
