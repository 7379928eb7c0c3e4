"""torch.autograd.Function: custom operators with a forward and a backward written in Python, on distributed tensors.

Function.apply runs forward with recording off, then records its outputs on the runtime's tape as one operator whose
derivative is the class's backward: a backward pass calls it with the gradients of the outputs (zeros for an output no
gradient reached) and takes one gradient or None per argument of forward. Both the forward (ctx, *args) and the
separate setup_context(ctx, inputs, output) styles work, as do save_for_backward, needs_input_grad,
mark_non_differentiable and create_graph (the backward's operators are then recorded, so they differentiate again).

libtorch's autograd, which serves the torch.Tensors of this shim, takes no derivative written in Python: a custom
function whose torch.Tensor arguments require grad is refused with a RuntimeError that says so.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from .grad_mode import is_grad_enabled, no_grad

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """What forward (or setup_context) leaves for backward."""

    def __init__(self) -> None:
        self.to_save: tuple = ()
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True
        self._non_differentiable: list = []

    def save_for_backward(self, *tensors: Any) -> None:
        """Keeps tensors (or None) for backward, which reads them as ctx.saved_tensors."""
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        return tuple(self.to_save)

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """Outputs that get no gradient: backward receives zeros for them."""
        self._non_differentiable.extend(outputs)

    def set_materialize_grads(self, value: bool) -> None:
        """Accepted; the gradient of an output that none reached is always given as zeros here."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *args: Any) -> None:
        raise RuntimeError("mark_dirty: custom functions that write into their inputs are not supported; return new tensors")


def once_differentiable(backward: Callable) -> Callable:
    """Runs backward with recording off, so that a create_graph pass does not differentiate through it."""

    @functools.wraps(backward)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        with no_grad():
            return backward(ctx, *grads)

    return wrapper


def _distributed_type() -> Any:
    import sys
    module = sys.modules.get("dtorch._tensor")
    return None if module is None else module.Tensor


class Function:
    """Subclass with static forward and backward methods and call MyFunction.apply(*args)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use new-style "
                           "autograd function with static forward method, and call it as %s.apply(...)" % type(self).__name__)

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom autograd.Function "
                                  "to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        from .._tensor import Tensor
        distributed = _distributed_type()
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple((isinstance(a, Tensor) or _is(a, distributed)) and a.requires_grad for a in args)
        recording = is_grad_enabled() and any(ctx.needs_input_grad)
        local = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if recording and local:
            raise RuntimeError("%s.apply: argument %d is a torch.Tensor that requires grad; custom autograd functions run "
                               "on distributed tensors (dtorch.Tensor), and libtorch's autograd, which serves torch.Tensors "
                               "here, takes no backward written in Python" % (cls.__name__, local[0]))
        with no_grad():
            if cls.setup_context is not Function.setup_context:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not recording:
            return output
        return _record(cls, ctx, args, output, distributed)


def _is(value: Any, distributed: Any) -> bool:
    return distributed is not None and isinstance(value, distributed)


def _record(cls: type, ctx: FunctionCtx, args: tuple, output: Any, distributed: Any) -> Any:
    """Records output (a tensor or a tuple) as made from the distributed arguments, with cls.backward as its derivative."""
    from dtorch import _autograd, _bridge
    single = not isinstance(output, tuple)
    outputs = [output] if single else list(output)
    positions = [i for i, a in enumerate(args) if isinstance(a, distributed)]
    inputs = [args[i] for i in positions]
    frozen = {id(o) for o in ctx._non_differentiable}
    recorded = []
    for k, out in enumerate(outputs):
        if not isinstance(out, distributed) or id(out) in frozen or not out.dtype.is_floating_point:
            continue
        if any(out is a for a in args) or out.requires_grad:
            out = outputs[k] = out.detach()  # an input returned as it is: the output is a new tensor of its values
        recorded.append(k)
    name = cls.__name__ + "Backward"

    def derivative(java_grads: Any) -> list:
        from dtorch._tensor import Tensor
        given = [Tensor(g) for g in java_grads]
        grads = []
        for k, out in enumerate(outputs):
            if k in recorded:
                grads.append(given[recorded.index(k)])
            else:
                grads.append(out.detach() * 0 if isinstance(out, distributed) and out.dtype.is_floating_point else None)
        result = cls.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) < len(args) or any(g is not None for g in result[len(args):]):
            raise RuntimeError("function %s returned an incorrect number of gradients (expected %d, got %d)"
                               % (name, len(args), len(result)))
        handles = []
        for i in positions:
            g = result[i]
            if g is None or not ctx.needs_input_grad[i]:
                handles.append(None)
                continue
            if not isinstance(g, distributed):
                raise TypeError("function %s returned a gradient of type %s at index %d; a distributed argument's "
                                "gradient is a dtorch.Tensor" % (name, type(g).__name__, i))
            if tuple(g.shape) != tuple(args[i].shape):
                raise RuntimeError("Function %s returned an invalid gradient at index %d - got %s but expected shape "
                                   "compatible with %s" % (name, i, list(g.shape), list(args[i].shape)))
            handles.append(g._java)
        return handles

    _bridge.call(_autograd._java().recordFunction, name, _autograd.handles(inputs, name + "(inputs)"),
                 [outputs[k]._java for k in recorded], derivative)
    return outputs[0] if single else tuple(outputs)
