"""Module backward hooks (register_full_backward_hook, register_full_backward_pre_hook) on distributed tensors.

As PyTorch does, the module's tensor inputs and outputs pass through identity functions whose derivatives call the
hooks: the outputs' derivative gets grad_output (the pre-hooks may replace it), the inputs' derivative gets grad_input
(the hooks may replace it) together with that grad_output. When no input requires grad, the hooks run on grad_output
with grad_input all None. The identity functions are torch.autograd.Functions, which run on distributed tensors only.
"""

from __future__ import annotations

from typing import Any

from ...autograd.function import Function
from ...autograd.grad_mode import is_grad_enabled
from ..parameter import is_distributed


class _State:
    """One call's hooks: the module, where its tensor arguments are, and the grad_output its outputs' derivative saw."""

    def __init__(self, module: Any, tensor_args: int, requiring: list) -> None:
        self.module = module
        self.tensor_args = tensor_args  # grad_input has one entry per distributed tensor argument
        self.requiring = requiring  # which of those entries require grad, in order
        self.grad_output: tuple | None = None


class _Identity(Function):
    """Views of its tensors, whose derivative (a subclass's backward) sees their gradients."""

    @staticmethod
    def forward(ctx: Any, state: _State, *tensors: Any) -> Any:
        ctx.state = state
        return tuple(t.view_as(t) for t in tensors)


class _Outputs(_Identity):

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        state = ctx.state
        grads = tuple(grads)
        for hook in list(state.module._backward_pre_hooks.values()):
            result = hook(state.module, grads)
            if result is not None:
                grads = _checked(result, len(grads), "backward pre-hook", "grad_output")
        state.grad_output = grads
        if not state.requiring:  # no input requires grad: the hooks run now, with grad_input all None
            _run_hooks(state, (None,) * state.tensor_args)
        return (None,) + grads


class _Inputs(_Identity):
    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        state = ctx.state
        full = [None] * state.tensor_args
        for k, g in zip(state.requiring, grads):
            full[k] = g
        full = _run_hooks(state, tuple(full))
        return (None,) + tuple(full[k] for k in state.requiring)


def _run_hooks(state: _State, grad_input: tuple) -> tuple:
    for hook in list(state.module._backward_hooks.values()):
        result = hook(state.module, grad_input, state.grad_output)
        if result is not None:
            grad_input = _checked(result, len(grad_input), "backward hook", "grad_input")
    return grad_input


def _checked(result: Any, count: int, what: str, name: str) -> tuple:
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != count:
        raise RuntimeError("%s returned an invalid number of %s, got %d, but expected %d" % (what, name, len(result), count))
    return result


def call_with_backward_hooks(module: Any, forward: Any, args: tuple, kwargs: dict) -> Any:
    """forward(*args, **kwargs) with the module's backward hooks around it, when grad mode is on and a tensor argument
    or output is a distributed tensor that requires grad; forward itself otherwise."""
    from ..._tensor import Tensor
    if not is_grad_enabled():
        return forward(*args, **kwargs)
    if any(isinstance(a, Tensor) and a.requires_grad for a in args):
        raise RuntimeError("%s has full backward hooks, which run on distributed tensors (dtorch.Tensor); libtorch's "
                           "autograd, which serves torch.Tensors here, takes no hook of a module" % type(module).__name__)
    tensor_args = [i for i, a in enumerate(args) if is_distributed(a)]
    requiring = [k for k, i in enumerate(tensor_args) if args[i].requires_grad]
    positions = [tensor_args[k] for k in requiring]
    state = _State(module, len(tensor_args), requiring)
    if positions:
        args = _through(_Inputs, state, args, positions)
    result = forward(*args, **kwargs)
    single = not isinstance(result, tuple)
    outputs = (result,) if single else result
    tensor_positions = [i for i, o in enumerate(outputs) if is_distributed(o) and o.requires_grad]
    if not tensor_positions:
        return result
    outputs = _through(_Outputs, state, outputs, tensor_positions)
    return outputs[0] if single else outputs


def _through(identity: Any, state: _State, values: tuple, positions: list) -> tuple:
    """`values` with those at `positions` passed through the identity function `identity` together."""
    out = list(values)
    for i, w in zip(positions, identity.apply(state, *(values[i] for i in positions))):
        out[i] = w
    return tuple(out)
