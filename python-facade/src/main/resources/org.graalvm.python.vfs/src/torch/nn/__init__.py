"""torch.nn: modules (Module; Linear, Embedding, Conv2d; LayerNorm, RMSNorm, GroupNorm, BatchNorm1d/2d/3d; Dropout;
the activations; the pooling layers; Flatten, Unflatten; the losses; Sequential, ModuleList, ModuleDict, Identity),
Parameter, the initialisations (torch.nn.init), the functional API (torch.nn.functional) and gradient clipping
(torch.nn.utils). Their parameters may be torch.Tensors, which autograd tracks, or distributed tensors (dtorch.Tensor)."""

from . import functional, init, utils
from .parameter import Parameter
from .modules import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d,
                      BatchNorm1d, BatchNorm2d, BatchNorm3d, BCEWithLogitsLoss, Conv1d, Conv2d, Conv3d,
                      CrossEntropyLoss, Dropout, ELU, Embedding, Flatten, GELU, GLU, GroupNorm, Hardsigmoid, Hardswish,
                      Hardtanh, Identity, L1Loss, LayerNorm, LeakyReLU, Linear, LogSoftmax, MaxPool1d, MaxPool2d, Mish,
                      Module, ModuleDict, ModuleList, MSELoss, NLLLoss, ReLU, ReLU6, RMSNorm, Sequential, Sigmoid, SiLU,
                      Softmax, Softplus, Tanh, Unflatten)
from .modules import __all__ as _modules

__all__ = ["functional", "init", "utils", "Parameter"] + _modules
