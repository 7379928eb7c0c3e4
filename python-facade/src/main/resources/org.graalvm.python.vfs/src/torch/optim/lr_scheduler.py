"""torch.optim.lr_scheduler: learning rates that change with each scheduler.step(), written into the optimizer's
param_groups (which its next step reads), with PyTorch's formulas, counters and state dicts.

A scheduler made with last_epoch=-1 records each group's lr as "initial_lr" and takes its first step at once, so the
groups hold the schedule's value at epoch 0 from the start.
"""

from __future__ import annotations

import math
import types
from typing import Callable

from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "CosineAnnealingLR"]


class LRScheduler:
    """The base of the schedules: get_lr() gives each group's lr at self.last_epoch; step() advances the epoch and
    writes them."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError("%s is not an Optimizer" % type(optimizer).__name__)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError("param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer" % i)
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def get_lr(self) -> list:
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The lr of each group that the last step() wrote."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advances to the next epoch (or to `epoch`, PyTorch's deprecated form) and writes each group's lr."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch), with one function for every group or one per group."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list, last_epoch: int = -1) -> None:
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError("Expected %d lr_lambdas, but got %d" % (len(optimizer.param_groups), len(lr_lambda)))
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict:
        """As LRScheduler's, with lr_lambdas as None for functions and lambdas, and as their attributes (__dict__) for
        callable objects, as PyTorch saves them."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class CosineAnnealingLR(LRScheduler):
    """lr anneals from initial_lr to eta_min along half a cosine over T_max epochs (and back up over the next T_max):
    eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed step by step from the previous lr as
    PyTorch does, so that an lr changed by hand between steps carries on."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:  # noqa: N803
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        groups = self.optimizer.param_groups
        epoch, t_max, eta_min = self.last_epoch, self.T_max, self.eta_min
        if epoch == 0:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and epoch > 0:
            return [eta_min + (base_lr - eta_min) * (1 + math.cos(epoch * math.pi / t_max)) / 2
                    for base_lr in self.base_lrs]
        if (epoch - 1 - t_max) % (2 * t_max) == 0:
            return [group["lr"] + (base_lr - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * epoch / t_max)) / (1 + math.cos(math.pi * (epoch - 1) / t_max))
                * (group["lr"] - eta_min) + eta_min for group in groups]

    def _get_closed_form_lr(self) -> list:
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]
