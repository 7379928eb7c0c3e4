"""dtorch.nn: functional operators on distributed tensors (dtorch.nn.functional)."""

from . import functional

__all__ = ["functional"]
