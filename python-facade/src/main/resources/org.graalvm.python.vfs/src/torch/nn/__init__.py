"""torch.nn: the functional API only (torch.nn.functional); modules are not supported yet."""

from . import functional

__all__ = ["functional"]
