"""BatchNorm1d, BatchNorm2d and BatchNorm3d: normalization over the batch and the spatial dimensions of each channel,
with running statistics (running_mean, running_var, num_batches_tracked) as in PyTorch.

On torch tensors the batch_norm operator updates the running statistics itself. On distributed tensors it takes none
in training (an operator does not write into its inputs), so the module normalizes with the batch statistics and then
updates its running statistics from them, with the unbiased variance, as the operator would: the same values, whatever
the mesh and placements."""

from __future__ import annotations

from typing import Any

from ... import _factories, _types
from ...autograd.grad_mode import no_grad
from .. import functional as F
from .. import init
from ..parameter import is_distributed
from .linear import empty_parameter, factory_kwargs
from .module import Module


class _BatchNorm(Module):
    _dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = empty_parameter(num_features, device=device, dtype=dtype)
            self.bias = empty_parameter(num_features, device=device, dtype=dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            kwargs = factory_kwargs(device, dtype)
            self.register_buffer("running_mean", _factories.zeros(num_features, **kwargs))
            self.register_buffer("running_var", _factories.ones(num_features, **kwargs))
            self.register_buffer("num_batches_tracked", _factories.tensor(0, dtype=_types.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input: Any) -> None:
        if len(input.shape) not in self._dims:
            raise ValueError("expected %s input (got %dD input)" % (" or ".join("%dD" % d for d in self._dims),
                                                                    len(input.shape)))

    def forward(self, input: Any) -> Any:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # the cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        tracked = not self.training or self.track_running_stats
        running_mean = self.running_mean if tracked else None
        running_var = self.running_var if tracked else None
        if batch_stats and running_mean is not None and is_distributed(input):
            out = F.batch_norm(input, None, None, self.weight, self.bias, True, factor, self.eps)
            self._update_running_stats(input, factor)
            return out
        return F.batch_norm(input, running_mean, running_var, self.weight, self.bias, batch_stats, factor, self.eps)

    def _update_running_stats(self, input: Any, factor: float) -> None:
        """running = (1 - factor) * running + factor * batch statistic, for the mean and the unbiased variance."""
        dims = [d for d in range(len(input.shape)) if d != 1]
        count = 1
        for d in dims:
            count *= input.shape[d]
        with no_grad():
            x = input.detach()
            mean = x.mean(dims)
            centered = x - mean.reshape(1, input.shape[1], *([1] * (len(input.shape) - 2)))
            var = (centered * centered).sum(dims) / max(count - 1, 1)
            for running, batch in ((self.running_mean, mean), (self.running_var, var)):
                if not is_distributed(running):
                    batch = batch.full_tensor()
                running.mul_(1.0 - factor).add_(batch.to(running.dtype) * factor)

    def extra_repr(self) -> str:
        return "%s, eps=%s, momentum=%s, affine=%s, track_running_stats=%s" % (
            self.num_features, self.eps, self.momentum, self.affine, self.track_running_stats)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) inputs."""

    _dims = (5,)
