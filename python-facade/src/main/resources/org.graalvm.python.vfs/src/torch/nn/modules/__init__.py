"""torch.nn's modules: the base class Module, the layers and the containers."""

from .module import Module
from .linear import Identity, Linear
from .activation import GELU, ReLU, SiLU
from .dropout import Dropout
from .sparse import Embedding
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .conv import Conv2d
from .container import ModuleDict, ModuleList, Sequential

__all__ = ["Module", "Identity", "Linear", "GELU", "ReLU", "SiLU", "Dropout", "Embedding", "GroupNorm", "LayerNorm",
           "RMSNorm", "Conv2d", "ModuleDict", "ModuleList", "Sequential"]
