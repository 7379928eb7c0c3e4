"""The Java side of autograd (org.dtorch.polyglot.torch.Autograd) and the few conversions its callers share.

libtorch records the graph itself: every operator goes through the ATen dispatcher, whose autograd kernels note what
backward needs when an input requires grad and grad mode is on. Grad mode and inference mode are libtorch's
thread-local state, so they belong to the Python thread (one Java thread) that sets them.
"""

from . import _dispatch, _interop

JAVA = _dispatch.JAVA.autograd()

call = _interop.call


def handles(tensors, what, nones=False):
    """The Java handles of a tensor or a sequence of tensors (None elements kept where `nones`), for one Java call."""
    from ._tensor import Tensor
    if isinstance(tensors, Tensor):
        return [tensors._java]
    if tensors is None:
        return []
    out = []
    for i, t in enumerate(tensors):
        if t is None and nones:
            out.append(None)
        elif isinstance(t, Tensor):
            out.append(t._java)
        else:
            raise TypeError("%s: element %d must be a torch.Tensor%s, got %s"
                            % (what, i, " or None" if nones else "", type(t).__name__))
    return out


def retain_flag(retain_graph):
    """retain_graph for Java: -1 for None (libtorch then keeps the graph only when it records the backward pass)."""
    return -1 if retain_graph is None else (1 if retain_graph else 0)


class GradFn:
    """The node of the graph that made a tensor, by name (MulBackward0, AddmmBackward0, ...). It tells that the tensor
    came out of a recorded operation; walking the graph from Python (next_functions) is not supported."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name

    def __repr__(self):
        return "<%s object>" % self._name
