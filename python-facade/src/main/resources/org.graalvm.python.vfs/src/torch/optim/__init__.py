"""torch.optim: optimizers (SGD, Adam, AdamW) and learning-rate schedules (torch.optim.lr_scheduler), with PyTorch's
names, arguments, update formulas and state-dict layout, for torch tensors and distributed tensors (dtorch.Tensor)
alike. A step runs ATen's multi-tensor and fused operators; on distributed parameters each device runs them over its
own shards."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
