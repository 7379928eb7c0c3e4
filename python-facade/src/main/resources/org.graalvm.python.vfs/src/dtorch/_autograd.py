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


def _check_create_graph(create_graph):
    if create_graph:
        raise NotImplementedError("create_graph=True (higher derivatives) is not supported on distributed tensors")


def backward(tensors: Sequence[Any], grad_tensors: Sequence[Any], retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Sequence[Any] = ()) -> None:
    """Accumulates the gradients of `tensors` (scalars, or seeded with `grad_tensors`) into the .grad of the leaves
    (of `inputs` only, when not empty)."""
    _check_create_graph(create_graph)
    _bridge.call(_java().backward, handles(tensors, "backward(tensors)"), handles(grad_tensors, "backward(grad_tensors)", True),
                 bool(retain_graph), handles(inputs, "backward(inputs)"))


def grad(outputs: Sequence[Any], inputs: Sequence[Any], grad_outputs: Sequence[Any], retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> list:
    """The gradients of `outputs` with respect to `inputs`, one per input (None for an unused one with allow_unused)."""
    from ._tensor import Tensor
    _check_create_graph(create_graph)
    results = _bridge.call(_java().gradients, handles(outputs, "grad(outputs)"), handles(inputs, "grad(inputs)"),
                           handles(grad_outputs, "grad(grad_outputs)", True), bool(retain_graph), bool(allow_unused))
    return [None if r is None else Tensor(r) for r in results]


def is_distributed(value: Any) -> bool:
    from ._tensor import Tensor
    return isinstance(value, Tensor)
