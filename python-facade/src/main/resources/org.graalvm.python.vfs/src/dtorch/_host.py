"""Values that came back from the workers are torch.Tensors: HostTensor is kept as their older name."""

from torch import Tensor as HostTensor

__all__ = ["HostTensor"]
