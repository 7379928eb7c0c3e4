"""State dicts in safetensors files (docs/safetensors.md): each device reads only its own shard's bytes.

    import dtorch
    from dtorch import Shard, Replicate

    mesh = dtorch.init_device_mesh("cpu", (4,))
    header = dtorch.safetensors.open_header("model.safetensors")        # names, dtypes, shapes; no data read
    state = dtorch.load_state_dict("model.safetensors",
                                   lambda name: (mesh, [Shard(0)]) if name.endswith("weight") else (mesh, [Replicate()]))
    dtorch.save_state_dict(state, "copy.safetensors", metadata={"format": "pt"})

The controller reads the headers; each device's worker maps and copies only the byte ranges of its own shard. A save
has each device write its own shard into its place in the file, which appears complete or not at all.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, NamedTuple, Sequence, Union

import torch as _torch
from torch._tensor import make_tensor

from . import _bridge
from ._tensor import Tensor
from .distributed_spec import DeviceMesh, _specs

PathLike = Union[str, os.PathLike]
Paths = Union[PathLike, Sequence[PathLike]]
# A tensor's place: (mesh, placements), or (mesh, placements, expected shape).
LayoutLike = Sequence[Any]
Plan = Union[Mapping[str, LayoutLike], Callable[[str], Union[LayoutLike, None]]]

__all__ = ["TensorInfo", "Header", "StateDict", "open_header", "load_state_dict", "save_state_dict", "load_file", "save_file"]


class TensorInfo(NamedTuple):
    """One tensor of a header: its dtype (a torch dtype), shape, file and byte range in the file's data section."""
    dtype: Any
    shape: tuple
    file: str
    data_offsets: tuple


class Header(NamedTuple):
    """The tensors of a checkpoint by name (file order) and the files' __metadata__."""
    tensors: dict
    metadata: dict


class StateDict(dict):
    """The loaded tensors by name; missing_keys and unexpected_keys list the names that did not match (non-strict)."""

    def __init__(self, items=(), missing_keys=(), unexpected_keys=()):
        super().__init__(items)
        self.missing_keys = list(missing_keys)
        self.unexpected_keys = list(unexpected_keys)


def _paths(path_or_paths: Paths) -> list:
    if isinstance(path_or_paths, (str, os.PathLike)):
        return [os.fspath(path_or_paths)]
    paths = [os.fspath(p) for p in path_or_paths]
    if not paths:
        raise ValueError("no safetensors file given")
    return paths


def _b():
    return _bridge.bridge()


def open_header(path_or_paths: Paths) -> Header:
    """The tensors of safetensors files or of an index (model.safetensors.index.json) without reading their data: every
    header is validated (a bad file raises ValueError naming the file and the tensor)."""
    rows, metadata = _bridge.call(_b().safetensorsHeader, _paths(path_or_paths))
    tensors = {}
    for row in rows:
        name, dtype, shape, file, begin, end = row
        tensors[str(name)] = TensorInfo(getattr(_torch, str(dtype)), tuple(int(s) for s in shape), str(file), (int(begin), int(end)))
    flat = [str(s) for s in metadata]
    return Header(tensors, dict(zip(flat[0::2], flat[1::2])))


def _layout(name, layout, ndim):
    """[mesh handle, placement specs, shape or None] for the bridge, from (mesh, placements[, shape])."""
    if not isinstance(layout, (tuple, list)) or len(layout) not in (2, 3):
        raise TypeError("the layout of %r must be (mesh, placements) or (mesh, placements, shape), got %r" % (name, layout))
    mesh, placements = layout[0], layout[1]
    if not isinstance(mesh, DeviceMesh):
        raise TypeError("the layout of %r must start with a DeviceMesh, got %r" % (name, mesh))
    shape = None if len(layout) == 2 or layout[2] is None else [int(s) for s in layout[2]]
    return [mesh._java, _specs(placements, ndim), shape]


def load_state_dict(path_or_paths: Paths, plan: Plan, strict: bool = True) -> StateDict:
    """The tensors of safetensors files (or an index) as dtorch.Tensors, each device reading only its own shard.

    `plan` gives each tensor its place: a dict name -> (mesh, placements) or (mesh, placements, expected_shape), or a
    function name -> such a tuple, or None to leave the tensor out. Placements are Shard and Replicate (a Partial
    cannot be loaded); uneven shards follow dtorch's balanced split. With strict=True a name of the dict that no file
    holds, or a tensor of the files the plan leaves out, raises ValueError before anything is read; with strict=False
    they are skipped and listed in the result's missing_keys and unexpected_keys.
    """
    paths = _paths(path_or_paths)
    header = open_header(paths)
    names, layouts = [], []
    for name, info in header.tensors.items():
        layout = plan(name) if callable(plan) else plan.get(name)
        if layout is not None:
            names.append(name)
            layouts.append(_layout(name, layout, len(info.shape)))
    if callable(plan):
        expected = None
    elif isinstance(plan, Mapping):
        expected = [str(k) for k in plan.keys()]
    else:
        raise TypeError("plan must be a dict or a function of the tensor name, got %r" % (type(plan).__name__,))
    keys, tensors, missing, unexpected = _bridge.call(_b().loadStateDict, paths, names, layouts, expected, bool(strict))
    return StateDict(((str(k), Tensor(t)) for k, t in zip(keys, tensors)), [str(m) for m in missing],
                     [str(u) for u in unexpected])


def _metadata(metadata):
    flat = []
    for k, v in (metadata or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("metadata keys and values must be str, got %r: %r" % (k, v))
        flat += [k, v]
    return flat


def save_state_dict(state_dict: Mapping[str, Tensor], path: PathLike, metadata: Mapping[str, str] | None = None,
                    max_shard_size: int | None = None) -> str:
    """Writes dtorch.Tensors to a safetensors file, each device writing its own shard (a Partial tensor is reduced
    first); returns when the file is complete. With max_shard_size (bytes of data per file), `path` is a directory that
    receives model-0000i-of-0000N.safetensors files and model.safetensors.index.json, whose path is returned."""
    names, tensors = [], []
    for k, v in state_dict.items():
        if not isinstance(v, Tensor):
            raise TypeError("save_state_dict: %r is a %s, not a dtorch.Tensor (use dtorch.safetensors.save_file for torch "
                            "tensors)" % (k, type(v).__name__))
        names.append(str(k))
        tensors.append(v._java)
    limit = 0 if max_shard_size is None else int(max_shard_size)
    if max_shard_size is not None and limit < 1:
        raise ValueError("max_shard_size must be positive, got %r" % (max_shard_size,))
    return str(_bridge.call(_b().saveStateDict, os.fspath(path), names, tensors, _metadata(metadata), limit))


def load_file(path_or_paths: Paths) -> dict:
    """Every tensor of safetensors files (or an index) as plain torch.Tensors in this process, as safetensors.torch's
    load_file gives them."""
    keys, values = _bridge.call(_b().loadSafetensorsFile, _paths(path_or_paths))
    return {str(k): make_tensor(v) for k, v in zip(keys, values)}


def save_file(tensors: Mapping[str, Any], path: PathLike, metadata: Mapping[str, str] | None = None) -> None:
    """Writes plain torch.Tensors to a safetensors file from this process, as safetensors.torch's save_file does."""
    names, values = [], []
    for k, v in tensors.items():
        if not isinstance(v, _torch.Tensor):
            raise TypeError("save_file: %r is a %s, not a torch.Tensor" % (k, type(v).__name__))
        names.append(str(k))
        values.append(v._java)
    _bridge.call(_b().saveSafetensorsFile, os.fspath(path), names, values, _metadata(metadata))
