"""torch.nn: modules (Module, Linear, Embedding, LayerNorm, RMSNorm, GroupNorm, Dropout, SiLU, GELU, ReLU, Conv2d,
Sequential, ModuleList, ModuleDict, Identity), Parameter, the initialisations (torch.nn.init), the functional API
(torch.nn.functional) and gradient clipping (torch.nn.utils). Their parameters may be torch.Tensors, which autograd
tracks, or distributed tensors (dtorch.Tensor)."""

from . import functional, init, utils
from .parameter import Parameter
from .modules import (Conv2d, Dropout, Embedding, GELU, GroupNorm, Identity, LayerNorm, Linear, Module, ModuleDict,
                      ModuleList, ReLU, RMSNorm, Sequential, SiLU)

__all__ = ["functional", "init", "utils", "Parameter", "Module", "Identity", "Linear", "GELU", "ReLU", "SiLU", "Dropout",
           "Embedding", "GroupNorm", "LayerNorm", "RMSNorm", "Conv2d", "ModuleDict", "ModuleList", "Sequential"]
