"""torch.nn's modules: the base class Module, the layers, the losses and the containers."""

from .module import Module
from .linear import Identity, Linear
from .activation import (ELU, GELU, GLU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSoftmax, Mish, ReLU, ReLU6,
                         Sigmoid, SiLU, Softmax, Softplus, Tanh)
from .dropout import Dropout
from .sparse import Embedding
from .normalization import GroupNorm, LayerNorm, RMSNorm
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, Conv3d
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d,
                      MaxPool1d, MaxPool2d)
from .flatten import Flatten, Unflatten
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .container import ModuleDict, ModuleList, Sequential

__all__ = ["Module", "Identity", "Linear", "ELU", "GELU", "GLU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
           "LogSoftmax", "Mish", "ReLU", "ReLU6", "Sigmoid", "SiLU", "Softmax", "Softplus", "Tanh", "Dropout", "Embedding",
           "GroupNorm", "LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Conv1d", "Conv2d", "Conv3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d",
           "MaxPool1d", "MaxPool2d", "Flatten", "Unflatten", "BCEWithLogitsLoss", "CrossEntropyLoss", "L1Loss", "MSELoss",
           "NLLLoss", "ModuleDict", "ModuleList", "Sequential"]
