"""The loss modules: MSELoss, L1Loss, CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss. Each calls its
torch.nn.functional function with the module's settings; class weights are buffers, as in PyTorch."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module


class _Loss(Module):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = F.legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """The mean (or sum, or each) of (input - target) ** 2."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """The mean (or sum, or each) of |input - target|."""

    def forward(self, input: Any, target: Any) -> Any:
        return F.l1_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """F.cross_entropy: logits (C), (N, C) or (N, C, d1, ...) against class indices or class probabilities."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Any:
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """F.nll_loss: log-probabilities (C), (N, C) or (N, C, d1, ...) against class indices."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits, with optional weight and pos_weight buffers."""

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 pos_weight: Any = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Any, target: Any) -> Any:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                  reduction=self.reduction)
