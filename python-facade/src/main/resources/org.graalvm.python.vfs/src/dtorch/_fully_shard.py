"""fully_shard: fully sharded data parallelism of torch.nn modules, with the name, arguments and behaviour of PyTorch's
FSDP2 (torch.distributed.fsdp.fully_shard).

    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    for block in model.layers:
        dtorch.fully_shard(block, mesh)
    dtorch.fully_shard(model, mesh)
    loss = F.cross_entropy(model(tokens), targets)    # tokens sharded on the batch over "dp"
    loss.backward()                                   # p.grad: Shard(0) over "dp", like p

Each parameter a call manages (those of the module that no fully_shard of a submodule manages already) becomes
Shard(0) over the data-parallel mesh dimension, beside the placements tensor parallelism gave it on the other mesh
dimensions. Before the module's forward its parameters are all-gathered over that dimension; after the forward the
gathered copies are released (reshard_after_forward), and the backward pass gathers them again right before the
derivatives that read them and releases them after (GradTape.releaseUntilBackward). A parameter's gradient is the
dual of the gather: the partial sums over "dp" are reduce-scattered into the parameter's own placements, so an
optimizer updates each device's shard with no communication.
"""

from __future__ import annotations

from typing import Any

from . import _bridge
from ._distribute_module import distributed_parameter
from ._tensor import Tensor, _mesh
from .distributed_spec import DeviceMesh, Replicate, Shard

__all__ = ["fully_shard", "FSDPModule"]

_DP_NAME = "dp"


class FSDPModule:
    """The class a module joins when fully_shard applies to it (isinstance(m, FSDPModule)), as in PyTorch: its managed
    parameters are sharded between forwards, and these methods change how."""

    def set_reshard_after_forward(self, reshard_after_forward: bool) -> None:
        """Whether the gathered parameters are released after each forward (True) or kept until the backward (False)."""
        self._fsdp_state.reshard_after_forward = _check_reshard(reshard_after_forward)

    def reshard(self) -> None:
        """Releases the gathered parameters of a forward still running or kept (reshard_after_forward=False) at once."""
        self._fsdp_state.reshard(self)


def _check_reshard(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        raise NotImplementedError("reshard_after_forward=%d (resharding to a smaller group after forward) is not "
                                  "supported; pass True or False" % value)
    raise TypeError("reshard_after_forward must be a bool, got %r" % (value,))


def _dp_dim(param_mesh: DeviceMesh, mesh: DeviceMesh | None) -> int:
    """The dimension of `param_mesh` that shards: the one `mesh` (a one-dimensional mesh of a named dimension) names,
    else the one named "dp", else the only one."""
    names = param_mesh.mesh_dim_names or ()
    if mesh is not None and mesh != param_mesh:
        sub = mesh.mesh_dim_names or ()
        if mesh.ndim == 1 and sub and sub[0] in names:
            return names.index(sub[0])
        raise ValueError("fully_shard: mesh %r is neither the parameters' mesh %r nor one of its named dimensions "
                         "(mesh[%r])" % (mesh, param_mesh, _DP_NAME))
    if param_mesh.ndim == 1:
        return 0
    if _DP_NAME in names:
        return names.index(_DP_NAME)
    raise NotImplementedError("fully_shard on a %d-dimensional mesh without a dimension named %r: hybrid sharding "
                              "(HSDP) is not supported; name the data-parallel dimension %r or pass mesh[%r]"
                              % (param_mesh.ndim, _DP_NAME, _DP_NAME, _DP_NAME))


class _Managed:
    """One parameter a fully_shard call manages: where it is registered, its sharded Parameter and its gathered
    placements."""

    __slots__ = ("owners", "sharded", "mesh", "gathered_placements")

    def __init__(self, owners: list, sharded: Any, mesh: DeviceMesh, gathered_placements: list) -> None:
        self.owners = owners
        self.sharded = sharded
        self.mesh = mesh
        self.gathered_placements = gathered_placements


class _State:
    """The sharding state of one fully_shard call. Not thread-safe: the client thread."""

    active = 0  # forwards of fully sharded modules now running; the outermost one is the root of that forward

    def __init__(self, managed: list, reshard_after_forward: bool) -> None:
        self.managed = managed
        self.reshard_after_forward = reshard_after_forward
        self.gathered: list = []
        self.root_call = False

    def pre_forward(self, module: Any, args: Any) -> None:
        self.root_call = _State.active == 0
        _State.active += 1
        self.release_gathered()
        for m in self.managed:
            full = m.sharded.redistribute(m.mesh, m.gathered_placements)
            self.gathered.append(full)
            for owner, name in m.owners:
                owner._parameters[name] = full
        return None

    def post_forward(self, module: Any, args: Any, output: Any) -> None:
        _State.active -= 1
        self.restore()
        # The root's parameters are the first its backward reads: PyTorch keeps them gathered, and so does this. A
        # forward that recorded nothing has no backward to keep them for.
        import torch
        if (self.reshard_after_forward and not self.root_call) or not torch.is_grad_enabled():
            self.release_gathered()
        else:
            self.gathered = []  # the recorded operators hold them until their backward
        return None

    def restore(self) -> None:
        for m in self.managed:
            for owner, name in m.owners:
                owner._parameters[name] = m.sharded

    def release_gathered(self) -> None:
        gathered, self.gathered = self.gathered, []
        autograd = _bridge.bridge().autograd()
        for full in gathered:
            _bridge.call(autograd.releaseUntilBackward, full._java)

    def reshard(self, module: Any) -> None:
        self.restore()
        self.release_gathered()


def _fsdp_class(cls: type) -> type:
    if issubclass(cls, FSDPModule):
        return cls
    return type("FSDP" + cls.__name__, (FSDPModule, cls), {"__module__": cls.__module__})


def _managed_parameters(module: Any) -> list:
    """[(owner module, name, parameter)] of every parameter below `module` that no fully sharded submodule manages, in
    named_parameters order, a parameter registered twice (tied weights) once per registration."""
    out = []
    skip: set = set()
    for _name, sub in module.named_modules():
        if sub is not module and getattr(sub, "_fsdp_state", None) is not None:
            skip.update(id(s) for s in sub.modules())
    for _name, sub in module.named_modules():
        if id(sub) in skip:
            continue
        for pname, param in sub._parameters.items():
            if param is not None:
                out.append((sub, pname, param))
    return out


def fully_shard(module: Any, mesh: DeviceMesh | None = None, *, reshard_after_forward: bool = True,
                **kwargs: Any) -> Any:
    """Shards the parameters of `module` over the data-parallel dimension of `mesh` and returns the module, whose class
    becomes a subclass of FSDPModule. Apply it to each block first, then to the root.

    mesh is a one-dimensional mesh, the runtime's whole mesh if None, or, for a module parallelized with
    parallelize_module on a two-dimensional ("dp", "tp") mesh, that mesh or mesh["dp"]. The parameters the call
    manages (those no fully sharded submodule manages) become Shard(0) on that dimension, keeping their placements on
    the others: a ColwiseParallel weight (Replicate(), Shard(0)) becomes (Shard(0), Shard(0)), a RowwiseParallel one
    (Shard(0), Shard(1)). A first dimension the devices do not divide gives uneven (or empty) shards.
    reshard_after_forward=True releases the gathered parameters after each forward and gathers them again for the
    backward; False keeps them from the forward to the backward. The outermost module of a forward keeps its own
    gathered, as its backward needs them first. Every check runs before any parameter moves."""
    from torch import nn
    if not isinstance(module, nn.Module):
        raise TypeError("fully_shard() takes a torch.nn.Module, got %r" % (type(module).__name__,))
    unsupported = sorted(k for k, v in kwargs.items() if v is not None)
    if unsupported:
        raise NotImplementedError("fully_shard: %s not supported (mixed precision, offloading and custom shard "
                                  "placements are not built)" % ", ".join(unsupported))
    reshard_after_forward = _check_reshard(reshard_after_forward)
    if getattr(module, "_fsdp_state", None) is not None:
        raise RuntimeError("fully_shard: this %s is fully sharded already; a module is sharded once"
                           % type(module).__name__)
    if mesh is not None and not isinstance(mesh, DeviceMesh):
        raise TypeError("mesh must be a DeviceMesh, got %r" % (mesh,))

    plans = {}
    for owner, name, param in _managed_parameters(module):
        if id(param) in plans:
            plans[id(param)][0].append((owner, name))
            continue
        if isinstance(param, Tensor):
            param_mesh = param.device_mesh
            dim = _dp_dim(param_mesh, mesh)
            current = list(param.placements)
            if not isinstance(current[dim], Replicate):
                raise ValueError("fully_shard: parameter %r is %r on mesh dimension %d, which fully_shard shards; it "
                                 "must be Replicate() there" % (name, current[dim], dim))
        else:
            param_mesh = _mesh(mesh)
            dim = _dp_dim(param_mesh, None)
            current = [Replicate()] * param_mesh.ndim
        if param.ndim == 0:
            raise ValueError("fully_shard: parameter %r is a scalar (0-d), which Shard(0) cannot split" % (name,))
        sharded = list(current)
        sharded[dim] = Shard(0)
        plans[id(param)] = ([(owner, name)], param, param_mesh, sharded, current)

    import torch
    managed = []
    for owners, param, param_mesh, sharded_placements, gathered_placements in plans.values():
        with torch.no_grad():
            sharded = distributed_parameter(param, param_mesh, sharded_placements)
        for owner, name in owners:
            owner._parameters[name] = sharded
        managed.append(_Managed(owners, sharded, param_mesh, gathered_placements))

    state = _State(managed, reshard_after_forward)
    object.__setattr__(module, "_fsdp_state", state)
    module.register_forward_pre_hook(state.pre_forward, prepend=True)
    module.register_forward_hook(state.post_forward, always_call=True)
    module.__class__ = _fsdp_class(type(module))
    return module
