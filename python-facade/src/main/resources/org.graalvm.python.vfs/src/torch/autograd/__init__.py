"""torch.autograd: gradients of torch tensors by libtorch's own engine.

backward() accumulates into the .grad of the leaves; grad() returns the gradients instead. The grad-mode switches
(no_grad, enable_grad, set_grad_enabled, inference_mode) are libtorch's thread-local modes, so each Python thread has
its own, as in PyTorch. Distributed tensors (dtorch.Tensor) go to the runtime's tape (dtorch._autograd), which reads
the same grad mode.
"""

from __future__ import annotations

from typing import Any

from .. import _autograd
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)
from . import function
from .function import Function

__all__ = ["backward", "grad", "Function", "function", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]


def _as_list(tensors: Any) -> list:
    from .._tensor import Tensor
    if tensors is None:
        return []
    if isinstance(tensors, Tensor) or _distributed([tensors]) is not None:
        return [tensors]
    return list(tensors)


def _distributed(tensors: list) -> Any:
    """dtorch's autograd module when `tensors` are distributed tensors, else None (torch never imports dtorch itself)."""
    import sys
    module = sys.modules.get("dtorch._autograd")
    if module is not None and tensors and any(module.is_distributed(t) for t in tensors):
        return module
    return None


def _gradients_for(tensors: list, grads: Any, what: str) -> list:
    """One gradient (or None) per tensor."""
    from .._tensor import Tensor
    if grads is None:
        return [None] * len(tensors)
    if isinstance(grads, Tensor):
        grads = [grads]
    grads = list(grads)
    if len(grads) != len(tensors):
        raise RuntimeError("%s should be a sequence of length %d (one per tensor), got %d" % (what, len(tensors), len(grads)))
    return grads


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
             inputs: Any = None) -> None:
    """Accumulates the gradients of `tensors` (scalars, or with one gradient each in `grad_tensors`) into the .grad of
    the leaves they depend on (of `inputs` only, when given)."""
    outputs = _as_list(tensors)
    grads = _gradients_for(outputs, grad_tensors, "grad_tensors")
    leaves = _as_list(inputs)
    if inputs is not None and not leaves:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    distributed = _distributed(outputs)
    if distributed is not None:
        distributed.backward(outputs, grads, retain_graph, create_graph, leaves)
        return
    _autograd.call(_autograd.JAVA.backward, _autograd.handles(outputs, "backward(tensors)"),
                   _autograd.handles(grads, "backward(grad_tensors)", nones=True), _autograd.retain_flag(retain_graph),
                   bool(create_graph), _autograd.handles(leaves, "backward(inputs)"))


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple:
    """The gradients of `outputs` with respect to `inputs`, as a tuple with one entry per input; nothing is accumulated
    into .grad. An input the outputs do not depend on is an error, unless allow_unused (its entry is None) or
    materialize_grads (its entry is zeros)."""
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    ins = _as_list(inputs)
    outs = _as_list(outputs)
    grads = _gradients_for(outs, grad_outputs, "grad_outputs")
    distributed = _distributed(outs)
    if distributed is not None:
        results = distributed.grad(outs, ins, grads, retain_graph, create_graph, allow_unused)
        if materialize_grads:
            results = [_zeros_like(ins[i]) if r is None else r for i, r in enumerate(results)]
        return tuple(results)
    results = _autograd.call(_autograd.JAVA.gradients, _autograd.handles(outs, "grad(outputs)"),
                             _autograd.handles(ins, "grad(inputs)"), _autograd.handles(grads, "grad(grad_outputs)", nones=True),
                             _autograd.retain_flag(retain_graph), bool(create_graph), bool(allow_unused))
    from .._tensor import make_tensor
    out = []
    for i, r in enumerate(results):
        if r is None:
            out.append(_zeros_like(ins[i]) if materialize_grads else None)
        else:
            out.append(make_tensor(r))
    return tuple(out)


def _zeros_like(t: Any) -> Any:
    distributed = _distributed([t])
    if distributed is not None:
        import dtorch
        return dtorch.zeros_like(t)
    from .._factories import zeros_like
    return zeros_like(t)
