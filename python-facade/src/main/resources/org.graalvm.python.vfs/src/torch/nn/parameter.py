"""torch.nn.Parameter: a tensor that a Module registers as one of its parameters.

Parameter(t) shares t's memory (PyTorch's Parameter is t's data, not a copy). A Parameter of a torch.Tensor is a
torch.Tensor of the subclass Parameter. A Parameter of a distributed tensor (dtorch.Tensor) is a dtorch.Tensor of a
subclass that isinstance(p, torch.nn.Parameter) recognizes, so that model code that builds distributed parameters as
PyTorch's does, nn.Parameter(distribute_tensor(...)), runs as written.

A Parameter is a leaf of autograd: it requires grad unless told otherwise, and backward() fills its .grad (libtorch's
engine for a torch.Tensor, the runtime's tape for a distributed tensor).
"""

from __future__ import annotations

import sys
from typing import Any

from .._dispatch import require
from .._tensor import Tensor, copy_leaf_state
from .. import _format

_DETACH = require("detach")


def distributed_tensor_type() -> type | None:
    """dtorch.Tensor if a script imported dtorch (no distributed tensor exists otherwise), else None: torch never
    imports dtorch itself."""
    module = sys.modules.get("dtorch._tensor")
    return None if module is None else module.Tensor


def is_distributed(value: Any) -> bool:
    """True for a dtorch.Tensor."""
    distributed = distributed_tensor_type()
    return distributed is not None and isinstance(value, distributed)


def is_tensor_like(value: Any) -> bool:
    """A torch.Tensor or a dtorch.Tensor: what a Module takes as a parameter's or a buffer's value."""
    return isinstance(value, Tensor) or is_distributed(value)


class _ParameterMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        # A distributed parameter is a dtorch.Tensor, not a Parameter by class; its type says that it is one.
        if cls is Parameter and getattr(type(instance), "_is_param", False):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A module's parameter: Parameter(data=None, requires_grad=True). data is a torch.Tensor (empty if None) or a
    dtorch.Tensor; the Parameter shares its memory. Of a torch.Tensor it is a new leaf of autograd (data's history, if
    any, is not its own), requiring grad as asked."""

    _is_param = True

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Any:
        if data is None:
            from .._factories import empty
            data = empty(0)
        if is_distributed(data):
            return _distributed_parameter(data, requires_grad)
        if not isinstance(data, Tensor):
            raise TypeError("Parameter() takes a torch.Tensor or a dtorch.Tensor, got %r" % (type(data).__name__,))
        param = object.__new__(cls)
        param._java = _DETACH(data)._java
        param.requires_grad_(requires_grad)
        return param

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        pass  # __new__ made it; Tensor.__init__ would build a new tensor from data

    def __deepcopy__(self, memo: dict) -> Any:
        """A new Parameter with a copy of the values, requires_grad and a deep copy of .grad."""
        if id(self) in memo:
            return memo[id(self)]
        result = Parameter(self.data.clone(), self.requires_grad)
        memo[id(self)] = result
        copy_leaf_state(self, result, memo)
        return result

    def __repr__(self) -> str:
        if self._java.isClosed():
            return "Parameter containing:\ntensor(<closed>)"
        return "Parameter containing:\n" + _format.tensor_repr(self)

    __str__ = __repr__


_DISTRIBUTED_PARAMETER: list[type] = []


def _distributed_parameter_type() -> type:
    """The class of distributed parameters, made on first use (it derives from dtorch.Tensor, which exists only
    once a script imported dtorch)."""
    if not _DISTRIBUTED_PARAMETER:
        base = distributed_tensor_type()

        class DistributedParameter(base):
            """A Parameter of a distributed tensor: a dtorch.Tensor and a leaf of the runtime's autograd. Operations on
            it give plain dtorch.Tensors, as operations on a Parameter give Tensors."""

            _is_param = True

            @property
            def data(self) -> Any:
                """The same memory without history (writes through it are not recorded)."""
                return self.detach()

            @data.setter
            def data(self, value: Any) -> None:
                """p.data = u: p shows u's values from now on and keeps its requires_grad and grad."""
                if not isinstance(value, base):
                    raise TypeError("data must be a dtorch.Tensor, got %r" % (type(value).__name__,))
                requires_grad = self.requires_grad
                grad = self.grad
                self._java = value.detach()._java
                if requires_grad:
                    self.requires_grad_(True)
                if grad is not None and tuple(grad.shape) == tuple(value.shape) and grad.dtype == value.dtype:
                    self.grad = grad

            def __deepcopy__(self, memo: dict) -> Any:
                """A new distributed Parameter with a copy of each shard, requires_grad and a deep copy of .grad."""
                if id(self) in memo:
                    return memo[id(self)]
                result = _distributed_parameter(self.detach().clone(), self.requires_grad)
                memo[id(self)] = result
                copy_leaf_state(self, result, memo)
                return result

            def __repr__(self) -> str:
                return "Parameter containing:\n" + base.__repr__(self)

            __str__ = __repr__

        DistributedParameter.__module__ = "torch.nn.parameter"
        _DISTRIBUTED_PARAMETER.append(DistributedParameter)
    return _DISTRIBUTED_PARAMETER[0]


def _distributed_parameter(data: Any, requires_grad: bool) -> Any:
    """A distributed leaf: `data`'s own handle when it is a leaf (a tensor just distributed, or made by a factory),
    else a detached view of it, so that its history is not the parameter's."""
    cls = _distributed_parameter_type()
    param = object.__new__(cls)
    param._java = data._java if data.is_leaf else data.detach()._java
    if requires_grad or param.requires_grad:
        param.requires_grad_(bool(requires_grad))
    return param
