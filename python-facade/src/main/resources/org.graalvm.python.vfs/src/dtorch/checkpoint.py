"""Training checkpoints: a model's and its optimizers' state saved to a directory and loaded back, onto the same layout
or another one (docs/training.md#checkpoints). The names are those of torch.distributed.checkpoint.

    from dtorch import checkpoint as dcp

    model_sd, optim_sd = dcp.get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd, "scheduler": scheduler.state_dict(), "step": step}, "ckpt/")

    # later, in a fresh run, with a model and optimizer built and parallelized as they are to be used
    model_sd, optim_sd = dcp.get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd, "scheduler": scheduler.state_dict(), "step": 0}
    dcp.load(state, "ckpt/")                       # fills `state` in place, resharding to its tensors' layouts
    dcp.set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    scheduler.load_state_dict(state["scheduler"])

A checkpoint directory holds:

    checkpoint.safetensors  every distributed tensor, by its dotted path ("model.layers.0.attention.wq.weight",
                            "optim.state.layers.0.attention.wq.weight.exp_avg"), each device writing its own shards;
                            its header's metadata "dtorch.checkpoint" holds the structure of the state as JSON: every
                            value that is not a tensor (param groups, a scheduler's state, the step number) and each
                            tensor's key, dtype, shape and saved layout
    host.safetensors        the plain torch tensors, if the state holds any (written by this process)

checkpoint.safetensors is written last, under a temporary name and then moved into place, and a save first removes the
one it replaces: a directory with a checkpoint.safetensors holds a complete checkpoint. Values that are not tensors are
kept as JSON (numbers, strings, booleans, None, lists, tuples and dicts with str or int keys), never pickled, so that
loading a checkpoint runs no code from it.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import torch as _torch

from . import safetensors as _safetensors
from ._tensor import Tensor
from .distributed_spec import Partial, Replicate

__all__ = ["save", "load", "get_state_dict", "set_state_dict", "get_model_state_dict", "get_optimizer_state_dict",
           "set_model_state_dict", "set_optimizer_state_dict", "CheckpointError"]

FORMAT = "dtorch-checkpoint"
VERSION = 1
METADATA_KEY = "dtorch.checkpoint"
CHECKPOINT_FILE = "checkpoint.safetensors"
HOST_FILE = "host.safetensors"


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded into the given state: a key it lacks, a shape or kind that differs, or a file
    that is missing or damaged. The message names the file and the key."""


# ---- save ----

def save(state_dict: Mapping[str, Any], checkpoint_id: str | os.PathLike) -> str:
    """Writes `state_dict` (nested dicts, lists and tuples of tensors and plain values) to the directory
    `checkpoint_id`, created if missing; returns the path of its checkpoint.safetensors. Every device writes its own shards of
    the distributed tensors (a Partial tensor is reduced first); the call returns when everything is on disk. A value
    that cannot be kept (a function, a set, a float64 tensor, ...) raises TypeError naming its key before anything is
    written."""
    directory = os.fspath(checkpoint_id)
    distributed: dict = {}
    host: dict = {}
    tree = _encode(state_dict, (), distributed, host)
    document = json.dumps({"format": FORMAT, "version": VERSION, "state": tree}, separators=(",", ":"))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CHECKPOINT_FILE)
    if os.path.exists(path):
        os.remove(path)  # the directory holds no checkpoint until the new one is complete
    if host:
        _safetensors.save_file(host, os.path.join(directory, HOST_FILE), metadata={"format": "pt"})
    metadata = {"format": "pt", METADATA_KEY: document}
    if distributed:
        _safetensors.save_state_dict(distributed, path, metadata=metadata)
    else:
        _safetensors.save_file({}, path, metadata=metadata)
    return path


def _key(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _encode(value: Any, path: tuple, distributed: dict, host: dict) -> Any:
    """The JSON form of `value`: containers tagged ({"dict": [[key, node], ...]}, {"list": [...]}, {"tuple": [...]},
    {"tensor": {...}}), plain values as themselves. Tensors are collected into `distributed` and `host` by key."""
    if isinstance(value, Tensor):
        key = _claim(_key(path), distributed, host)
        distributed[key] = value
        return {"tensor": {"key": key, "file": CHECKPOINT_FILE, "dtype": str(value.dtype).replace("torch.", ""),
                           "shape": list(value.shape), "mesh": list(value.device_mesh.shape),
                           "placements": [repr(p) for p in value.placements]}}
    if isinstance(value, _torch.Tensor):
        key = _claim(_key(path), distributed, host)
        host[key] = value.detach()
        return {"tensor": {"key": key, "file": HOST_FILE, "dtype": str(value.dtype).replace("torch.", ""),
                           "shape": list(value.shape)}}
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError("checkpoint save: the key %r under %r is a %s; keys must be str or int"
                                % (k, _key(path) or "the state dict", type(k).__name__))
            items.append([k, _encode(v, path + (k,), distributed, host)])
        return {"dict": items}
    if isinstance(value, list):
        return {"list": [_encode(v, path + (i,), distributed, host) for i, v in enumerate(value)]}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, path + (i,), distributed, host) for i, v in enumerate(value)]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError("checkpoint save: %r is a %s; a checkpoint keeps tensors, numbers, strings, booleans, None, lists, "
                    "tuples and dicts" % (_key(path), type(value).__name__))


def _claim(key: str, distributed: dict, host: dict) -> str:
    if key in distributed or key in host:
        raise TypeError("checkpoint save: two tensors have the key %r (a key with a dot in it meets a nested one); "
                        "rename one of them" % (key,))
    return key


# ---- load ----

def load(state_dict: dict, checkpoint_id: str | os.PathLike) -> dict:
    """Fills `state_dict` in place from the checkpoint in the directory `checkpoint_id` and returns it. Each tensor of
    `state_dict` receives the saved tensor of the same key, read onto the tensor's own mesh and placements (each device
    reads only its shard), whatever layout it was saved from; every other value is replaced by the saved one, and a
    key that `state_dict` lacks is added when its value holds no tensor (or when its dict knows the parameter the
    tensor belongs to, as get_optimizer_state_dict's state does). Keys of the checkpoint that `state_dict` does not
    ask for are left out.

    Everything is checked before anything changes: a missing directory or checkpoint.safetensors, a key of `state_dict` the
    checkpoint lacks, a tensor where a value was saved (or the reverse), a shape that differs, or a damaged tensor file
    raises CheckpointError (a ValueError; FileNotFoundError for a missing checkpoint) naming the file and the key, and
    leaves `state_dict` and the tensors in it as they were."""
    directory = os.fspath(checkpoint_id)
    document = _read_metadata(directory)
    plan = _LoadPlan(directory)
    plan.walk_dict(state_dict, document["state"], ())
    loaded = plan.read()
    _apply(plan, loaded)
    return state_dict


def _read_metadata(directory: str) -> dict:
    path = os.path.join(directory, CHECKPOINT_FILE)
    if not os.path.isdir(directory):
        raise FileNotFoundError("no checkpoint at %s: the directory does not exist" % (directory,))
    if not os.path.isfile(path):
        raise FileNotFoundError("no checkpoint at %s: %s is missing (a save that did not finish leaves none)"
                                % (directory, path))
    metadata = _safetensors.open_header(path).metadata  # a damaged header raises ValueError naming the file
    if METADATA_KEY not in metadata:
        raise CheckpointError("%s is a safetensors file without the %r metadata of a dtorch checkpoint" % (path, METADATA_KEY))
    try:
        document = json.loads(metadata[METADATA_KEY])
    except ValueError as e:
        raise CheckpointError("%s: its %r metadata is not JSON: %s" % (path, METADATA_KEY, e)) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT or "state" not in document:
        raise CheckpointError("%s: its %r metadata is not a %s" % (path, METADATA_KEY, FORMAT))
    if document.get("version") != VERSION:
        raise CheckpointError("%s has version %r; this dtorch reads version %d" % (path, document.get("version"), VERSION))
    return document


class _LoadPlan:
    """What a load does, found by walking the target state dict beside the saved structure: tensors to read (with the
    layout each is read onto) and values to put in place. Walking changes nothing, so an error leaves all as it was."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.metadata_path = os.path.join(directory, CHECKPOINT_FILE)
        self.copies: list = []       # (target tensor, saved tensor info)
        self.puts: list = []         # (container, key, decoded value or tensor info, layout param or None)
        self.distributed: dict = {}  # key -> (mesh, placements, shape)
        self.host: set = set()

    def fail(self, path: tuple, message: str) -> None:
        raise CheckpointError("checkpoint %s: %r %s" % (self.metadata_path, _key(path), message))

    def walk_dict(self, target: Any, saved: Any, path: tuple) -> None:
        if not isinstance(saved, dict) or "dict" not in saved:
            self.fail(path, "is a dict here but was saved as %s" % (_kind(saved),))
        items = {(type(k).__name__, k): v for k, v in saved["dict"]}
        for key in list(target.keys()):
            tag = (type(key).__name__, key)
            if tag not in items:
                self.fail(path + (key,), "is not in the checkpoint")
            self.walk(target, key, items.pop(tag), path + (key,))
        for (_, key), node in items.items():
            tensors = _tensors_in(node)
            if not tensors:
                self.puts.append((target, key, _decode(node), None))
            elif getattr(target, "_param", None) is not None and len(tensors) == 1 and "tensor" in node:
                self.tensor_for_param(target, key, node["tensor"], path + (key,))
            # Anything else the target does not ask for stays out, as torch.distributed.checkpoint leaves it.

    def walk(self, container: Any, key: Any, saved: Any, path: tuple) -> None:
        target = container[key]
        if isinstance(target, (Tensor, _torch.Tensor)):
            if not isinstance(saved, dict) or "tensor" not in saved:
                self.fail(path, "is a tensor here but was saved as %s" % (_kind(saved),))
            info = saved["tensor"]
            if list(target.shape) != list(info["shape"]):
                self.fail(path, "has the shape %s here but %s in the checkpoint" % (list(target.shape), info["shape"]))
            if isinstance(target, Tensor):
                self.read_onto(info, target.device_mesh, target.placements, path)
            else:
                self.read_to_host(info, path)
            self.copies.append((target, info))
        elif isinstance(target, Mapping):
            self.walk_dict(target, saved, path)
        else:
            if _tensors_in(saved):
                self.fail(path, "is a %s here but holds tensors in the checkpoint; pass a state dict with tensors "
                                "there (get_state_dict gives them) to say where they go" % (type(target).__name__,))
            self.puts.append((container, key, _decode(saved), None))

    def tensor_for_param(self, container: dict, key: Any, info: dict, path: tuple) -> None:
        """A saved optimizer state tensor the target lacks: read onto its parameter's layout (a 0-d step count, or any
        state of another shape, replicated on the parameter's mesh)."""
        param = container._param
        if isinstance(param, Tensor):
            if list(info["shape"]) == list(param.shape):
                placements = param.placements
            else:
                placements = [Replicate()] * param.device_mesh.ndim
            self.read_onto(info, param.device_mesh, placements, path)
        else:
            self.read_to_host(info, path)
        self.puts.append((container, key, info, param))

    def read_onto(self, info: dict, mesh: Any, placements: Any, path: tuple) -> None:
        if info.get("file") != CHECKPOINT_FILE:
            self.fail(path, "is a distributed tensor here but a plain tensor in the checkpoint")
        # A Partial target is written whole by copy_, so its values are read replicated.
        layout = [Replicate() if isinstance(p, Partial) else p for p in placements]
        self.distributed[info["key"]] = (mesh, layout, tuple(info["shape"]))

    def read_to_host(self, info: dict, path: tuple) -> None:
        if info.get("file") not in (CHECKPOINT_FILE, HOST_FILE):
            self.fail(path, "names an unknown file %r" % (info.get("file"),))
        self.host.add((info["file"], info["key"]))

    def read(self) -> dict:
        """Every tensor the plan needs: distributed ones returned at once (their devices read their shards), plain ones
        read in this process. A damaged file raises ValueError naming the file and the tensor."""
        values: dict = {}
        if self.distributed:
            path = os.path.join(self.directory, CHECKPOINT_FILE)
            _require_file(path, self.metadata_path)
            found = _safetensors.load_state_dict(path, self.distributed, strict=False)
            if found.missing_keys:
                raise CheckpointError("checkpoint %s: %s lacks the tensor %r that its metadata lists"
                                      % (self.directory, path, found.missing_keys[0]))
            values.update(((CHECKPOINT_FILE, k), v) for k, v in found.items())
        for file in sorted({f for f, _ in self.host}):
            path = os.path.join(self.directory, file)
            _require_file(path, self.metadata_path)
            tensors = _safetensors.load_file(path)
            for f, k in self.host:
                if f == file:
                    if k not in tensors:
                        raise CheckpointError("checkpoint %s: %s lacks the tensor %r that %s lists"
                                              % (self.directory, path, k, CHECKPOINT_FILE))
                    values[(f, k)] = tensors[k]
        return values


def _require_file(path: str, metadata_path: str) -> None:
    if not os.path.isfile(path):
        raise CheckpointError("checkpoint: %s is missing (%s lists it)" % (path, metadata_path))


def _apply(plan: _LoadPlan, loaded: dict) -> None:
    with _torch.no_grad():
        for target, info in plan.copies:
            value = _value(loaded, info, target)
            if isinstance(target, Tensor) or not isinstance(value, Tensor):
                target.copy_(value)
            else:
                target.copy_(value.full_tensor())
        for container, key, value, param in plan.puts:
            if isinstance(value, dict) and param is not None:
                value = _value(loaded, value, param)
            container[key] = value


def _value(loaded: dict, info: dict, like: Any) -> Any:
    if isinstance(like, Tensor):
        return loaded[(CHECKPOINT_FILE, info["key"])]
    found = loaded.get((info["file"], info["key"]))
    if found is None:  # a distributed tensor of the checkpoint wanted as a plain one
        found = loaded[(CHECKPOINT_FILE, info["key"])]
    return found


def _kind(node: Any) -> str:
    if isinstance(node, dict):
        for tag in ("tensor", "dict", "list", "tuple"):
            if tag in node:
                return "a " + tag
    return "the value %r" % (node,)


def _tensors_in(node: Any) -> list:
    if isinstance(node, dict):
        if "tensor" in node:
            return [node["tensor"]]
        if "dict" in node:
            return [t for _, v in node["dict"] for t in _tensors_in(v)]
        return [t for v in node.get("list", node.get("tuple", [])) for t in _tensors_in(v)]
    return []


def _decode(node: Any) -> Any:
    if isinstance(node, dict):
        if "dict" in node:
            return {k: _decode(v) for k, v in node["dict"]}
        if "list" in node:
            return [_decode(v) for v in node["list"]]
        if "tuple" in node:
            return tuple(_decode(v) for v in node["tuple"])
    return node


# ---- state dicts of models and optimizers ----

class _ParamState(dict):
    """One parameter's optimizer state in get_optimizer_state_dict's result: a dict that also knows its parameter, so
    that a load can read saved state the optimizer has not made yet (before its first step) onto that parameter's
    layout."""

    def __init__(self, items: Any, param: Any) -> None:
        super().__init__(items)
        self._param = param


def _optimizers(optimizers: Any) -> list:
    if isinstance(optimizers, _torch.optim.Optimizer):
        return [optimizers]
    listed = list(optimizers)
    for o in listed:
        if not isinstance(o, _torch.optim.Optimizer):
            raise TypeError("expected a torch.optim.Optimizer or a list of them, got %s" % (type(o).__name__,))
    return listed


def _names(model: Any) -> dict:
    return {id(p): name for name, p in model.named_parameters()}


def get_model_state_dict(model: Any) -> dict:
    """The model's parameters and persistent buffers by name (model.state_dict(): the module's own memory)."""
    return model.state_dict()


def get_optimizer_state_dict(model: Any, optimizers: Any) -> dict:
    """The state of one optimizer (or of a list of them, merged) keyed by parameter name instead of index:
    {"state": {name: {"step": ..., "exp_avg": ...}}, "param_groups": [{"lr": ..., "params": [name, ...]}]}. Every
    parameter has an entry, empty before the optimizer's first step. The tensors are the optimizer's own (not copies)."""
    names = _names(model)
    state: dict = {}
    groups: list = []
    for optimizer in _optimizers(optimizers):
        for group in optimizer.param_groups:
            fqns = []
            for p in group["params"]:
                if id(p) not in names:
                    raise ValueError("an optimizer's parameter of shape %s is not a parameter of the model"
                                     % (list(p.shape),))
                fqns.append(names[id(p)])
                state[names[id(p)]] = _ParamState(optimizer.state.get(p, {}), p)
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = fqns
            groups.append(packed)
    return {"state": state, "param_groups": groups}


def get_state_dict(model: Any, optimizers: Any) -> tuple:
    """(get_model_state_dict(model), get_optimizer_state_dict(model, optimizers))."""
    return get_model_state_dict(model), get_optimizer_state_dict(model, optimizers)


def set_model_state_dict(model: Any, model_state_dict: Mapping, strict: bool = True) -> Any:
    """Copies the values into the model's parameters and buffers onto their layouts (model.load_state_dict)."""
    return model.load_state_dict(model_state_dict, strict=strict)


def set_optimizer_state_dict(model: Any, optimizers: Any, optim_state_dict: Mapping) -> None:
    """Puts the state and hyper-parameters of get_optimizer_state_dict's layout into the optimizers: each parameter's
    state on its own layout (copies, so that no two optimizers share state), each group's hyper-parameters (lr,
    betas, initial_lr, ...). The groups must name the same parameters in the same order; a difference raises
    ValueError naming it before anything changes."""
    names = _names(model)
    optimizers = _optimizers(optimizers)
    saved_groups = list(optim_state_dict["param_groups"])
    groups = [g for o in optimizers for g in o.param_groups]
    if len(groups) != len(saved_groups):
        raise ValueError("the optimizer state has %d parameter groups; the optimizers have %d"
                         % (len(saved_groups), len(groups)))
    for i, (group, saved) in enumerate(zip(groups, saved_groups)):
        fqns = [names.get(id(p)) for p in group["params"]]
        if list(saved["params"]) != fqns:
            raise ValueError("parameter group %d names %s in the optimizer state but %s in the optimizer"
                             % (i, list(saved["params"]), fqns))
    saved_state = optim_state_dict["state"]
    new_states = []
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for p in group["params"]:
                values = saved_state.get(names[id(p)], {})
                new_states.append((optimizer, p, {k: _state_onto(p, names[id(p)], k, v) for k, v in values.items()}))
    with _torch.no_grad():
        for group, saved in zip(groups, saved_groups):
            group.update({k: v for k, v in saved.items() if k != "params"})
        for optimizer, p, values in new_states:
            if values:
                optimizer.state[p] = values
            else:
                optimizer.state.pop(p, None)


def set_state_dict(model: Any, optimizers: Any, *, model_state_dict: Mapping, optim_state_dict: Mapping) -> Any:
    """set_model_state_dict and set_optimizer_state_dict together; returns the model's missing and unexpected keys."""
    result = set_model_state_dict(model, model_state_dict)
    set_optimizer_state_dict(model, optimizers, optim_state_dict)
    return result


def _state_onto(param: Any, name: str, key: str, value: Any) -> Any:
    """A copy of one state value on `param`'s layout: its mesh and placements for a tensor of its shape, replicated on
    its mesh otherwise (a 0-d step count); a plain parameter's on its device (floating point in its dtype, but the step
    count)."""
    if isinstance(param, Tensor):
        if not isinstance(value, (Tensor, _torch.Tensor)):
            return value
        whole = list(value.shape) == list(param.shape)
        placements = param.placements if whole else [Replicate()] * param.device_mesh.ndim
        if isinstance(value, _torch.Tensor):
            from . import distribute_tensor
            return distribute_tensor(value.detach().clone(), param.device_mesh, placements)
        if value.device_mesh == param.device_mesh and tuple(value.placements) == tuple(placements):
            return value.detach().clone()
        return value.redistribute(param.device_mesh, placements).detach().clone()
    if isinstance(value, Tensor):
        value = value.full_tensor()
    from torch.optim.optimizer import _cast_state
    return _cast_state(param, key, value)
