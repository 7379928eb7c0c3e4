"""torch.optim.Optimizer: parameter groups, per-parameter state, zero_grad, and state_dict / load_state_dict in
PyTorch's layout ({"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}, indices counted over the
groups in order), so that a state dict written here names the same things as PyTorch's.

An optimizer's step runs ATen's multi-tensor operators (_foreach_*, _fused_*) on the parameters of a group at once,
grouped by device and dtype, so one step is a few operator calls, not a few per parameter. Distributed parameters
(dtorch.Tensor) are grouped by mesh and dtype: each multi-tensor call runs on every device of the mesh over its own
shards of all the parameters, gradients and states, with no communication.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from typing import Any, Callable, Iterable

from .._dispatch import require
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad

_FOREACH_ZERO_ = require("_foreach_zero_")


class _RequiredParameter:
    """The default of a hyper-parameter that every group must give (lr where an optimizer has no default)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _is_tensor(value: Any) -> bool:
    return isinstance(value, Tensor)


def is_distributed(value: Any) -> bool:
    """True for a dtorch.Tensor (torch never imports dtorch itself)."""
    from ..nn.parameter import is_distributed as distributed
    return distributed(value)


def device_key(t: Any) -> str:
    """What a multi-tensor call's tensors share: a torch tensor's device, or a distributed tensor's mesh."""
    return "mesh %r" % (t.device_mesh,) if is_distributed(t) else str(t.device)


def state_like(p: Any) -> Any:
    """Zeros of `p`'s shape and dtype where `p` lies: on its device, or on its mesh with its placements."""
    if is_distributed(p):
        import dtorch
        return dtorch.zeros_like(p)
    from .._factories import zeros_like
    return zeros_like(p)


def step_counter(p: Any) -> Any:
    """A float32 0-d step count of 0 where `p` lies (replicated on a distributed parameter's mesh)."""
    if is_distributed(p):
        import dtorch
        return dtorch.zeros((), dtype=dtorch.float32, device_mesh=p.device_mesh)
    from .._factories import tensor
    from .._types import float32
    return tensor(0.0, dtype=float32, device=p.device)


class Optimizer:
    """The base of the optimizers: Optimizer(params, defaults). params is an iterable of tensors, or of dicts that
    each hold "params" and the hyper-parameters that differ from `defaults` for that group."""

    def __init__(self, params: Iterable[Any], defaults: dict) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but got "
                            + type(params).__name__)
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict) -> None:
        """Adds a group of parameters, each hyper-parameter it does not give taken from the defaults."""
        if not isinstance(param_group, dict):
            raise TypeError("param_group must be a dict, but got " + type(param_group).__name__)
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor) and not is_distributed(param):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + type(param).__name__)
            if not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required optimization parameter " + name)
            param_group.setdefault(name, default)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Removes every parameter's gradient (set_to_none, the default), or fills the gradients with zeros (one
        multi-tensor operator per device and dtype)."""
        by_kind: dict = defaultdict(list)
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if grad.grad_fn is not None:
                    grad.detach_()
                else:
                    grad.requires_grad_(False)
                by_kind[(device_key(grad), grad.dtype)].append(grad)
        with no_grad():
            for grads in by_kind.values():
                _FOREACH_ZERO_(grads)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        raise NotImplementedError("%s does not define step()" % type(self).__name__)

    def _closure_loss(self, closure: Callable[[], Any] | None) -> Any:
        """What step(closure) returns: the closure's loss, computed with grad mode on (it calls backward)."""
        if closure is None:
            return None
        from ..autograd.grad_mode import enable_grad
        with enable_grad():
            return closure()

    # ---- state dicts ----
    def state_dict(self) -> dict:
        """{"state": {index: per-parameter state}, "param_groups": [group with "params" as indices]}. The values are
        the optimizer's own tensors (not copies), as in PyTorch."""
        index: dict[int, int] = {}
        groups = []
        start = 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {index[id(p)]: v for p, v in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Takes the state and the hyper-parameters of a state dict of an optimizer of the same groups; its tensors are
        copied to each parameter's device (and dtype, for floating-point state other than the step count)."""
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's "
                             "group")
        id_map = {}
        for g, s in zip(groups, saved_groups):
            for saved, p in zip(s["params"], g["params"]):
                id_map[saved] = p
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in id_map:
                param = id_map[key]
                state[param] = {k: _cast_state(param, k, v) for k, v in value.items()}
            else:
                state[key] = value
        new_groups = []
        for g, s in zip(groups, saved_groups):
            updated = {k: v for k, v in s.items() if k != "params"}
            updated["params"] = g["params"]
            new_groups.append(updated)
        self.state = state
        self.param_groups = new_groups

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append("Parameter Group %d" % i)
            for key in sorted(group):
                if key != "params":
                    lines.append("    %s: %s" % (key, group[key]))
        lines.append(")")
        return "\n".join(lines)


def _cast_state(param: Tensor, key: str, value: Any) -> Any:
    """A state value for `param`: a copy of a tensor on its device (a distributed one on its own layout), in its dtype if
    floating point, except the step count, which keeps its own dtype (a float32 scalar). Copies, so that two optimizers
    never share state."""
    if is_distributed(value):
        # On its own mesh and placements; a new tensor either way, as to(copy=True) gives for a torch.Tensor.
        if key != "step" and value.dtype.is_floating_point and value.dtype != param.dtype:
            return value.to(param.dtype)
        return value.clone()
    if not isinstance(value, Tensor):
        return value
    if key != "step" and value.is_floating_point():
        return value.to(dtype=param.dtype, device=param.device, copy=True)
    return value.to(device=param.device, copy=True)


def group_by_device_and_dtype(*lists: list) -> OrderedDict:
    """The parallel lists split by the (device, dtype) of the first list's tensors, in first-seen order: what a
    multi-tensor operator takes in one call."""
    grouped: OrderedDict = OrderedDict()
    for i, p in enumerate(lists[0]):
        key = (device_key(p), p.dtype)
        if key not in grouped:
            grouped[key] = tuple([] for _ in lists)
        for column, values in zip(grouped[key], lists):
            column.append(values[i])
    return grouped
