"""Autograd of distributed tensors: the runtime's tape (org.dtorch.api.GradTape) through the bridge.

The runtime records every operator the script issues on a tensor that requires grad while grad mode is on; grad mode
is libtorch's thread-local switch, so torch.no_grad(), torch.enable_grad(), torch.set_grad_enabled() and
torch.inference_mode() stop and start recording for distributed tensors as they do for torch tensors. backward()
issues the derivatives as distributed operators; a leaf's gradient has the leaf's mesh and placements (Partial as
Replicate).
"""

from __future__ import annotations

from typing import Any, Sequence

from . import _bridge


def _java():
    return _bridge.bridge().autograd()


def handles(tensors: Sequence[Any], what: str, nones: bool = False) -> list:
    """The Java handles of distributed tensors (None kept where `nones`)."""
    from ._tensor import Tensor
    out = []
    for i, t in enumerate(tensors):
        if t is None and nones:
            out.append(None)
        elif isinstance(t, Tensor):
            out.append(t._java)
        else:
            raise TypeError("%s: element %d must be a dtorch.Tensor%s, got %s"
                            % (what, i, " or None" if nones else "", type(t).__name__))
    return out


def _retain(retain_graph, create_graph):
    """retain_graph as torch reads it: None means create_graph."""
    return bool(create_graph) if retain_graph is None else bool(retain_graph)


def backward(tensors: Sequence[Any], grad_tensors: Sequence[Any], retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Sequence[Any] = ()) -> None:
    """Accumulates the gradients of `tensors` (scalars, or seeded with `grad_tensors`) into the .grad of the leaves
    (of `inputs` only, when not empty). create_graph records the backward pass: the gradients can be differentiated."""
    _bridge.call(_java().backward, handles(tensors, "backward(tensors)"), handles(grad_tensors, "backward(grad_tensors)", True),
                 _retain(retain_graph, create_graph), bool(create_graph), handles(inputs, "backward(inputs)"))


def grad(outputs: Sequence[Any], inputs: Sequence[Any], grad_outputs: Sequence[Any], retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> list:
    """The gradients of `outputs` with respect to `inputs`, one per input (None for an unused one with allow_unused)."""
    from ._tensor import Tensor
    results = _bridge.call(_java().gradients, handles(outputs, "grad(outputs)"), handles(inputs, "grad(inputs)"),
                           handles(grad_outputs, "grad(grad_outputs)", True), _retain(retain_graph, create_graph),
                           bool(create_graph), bool(allow_unused))
    return [None if r is None else Tensor(r) for r in results]


class RemovableHandle:
    """The handle register_hook returns: remove() takes the hook off (idempotent); as a context manager it removes the
    hook on exit."""

    __slots__ = ("_java",)

    def __init__(self, java: Any) -> None:
        self._java = java

    def remove(self) -> None:
        _bridge.call(_java().removeHook, self._java)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def register_hook(tensor: Any, hook: Any) -> RemovableHandle:
    """Registers hook(grad) -> grad or None on a distributed tensor (the tape calls it with the complete gradient)."""
    from ._tensor import Tensor
    if not callable(hook):
        raise TypeError("register_hook: the hook must be callable, got %r" % (hook,))

    def call(java_grad):
        result = hook(Tensor(java_grad))
        if result is None:
            return None
        if not isinstance(result, Tensor):
            raise TypeError("a hook of a distributed tensor must return a dtorch.Tensor or None, got %s" % type(result).__name__)
        return result._java

    return RemovableHandle(_bridge.call(_java().registerHook, tensor._java, call))


def is_distributed(value: Any) -> bool:
    from ._tensor import Tensor
    return isinstance(value, Tensor)
