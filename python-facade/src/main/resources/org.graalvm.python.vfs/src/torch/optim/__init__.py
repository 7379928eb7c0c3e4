"""torch.optim: optimizers of torch tensors' gradients (SGD, Adam, AdamW) and learning-rate schedules
(torch.optim.lr_scheduler), with PyTorch's names, arguments, update formulas and state-dict layout. A step runs ATen's
multi-tensor and fused operators. Distributed tensors (dtorch.Tensor) have no gradients yet, so nothing here takes
them."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
