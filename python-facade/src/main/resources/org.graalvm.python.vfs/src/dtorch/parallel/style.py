"""Parallel styles, with PyTorch's names, arguments and defaults (torch.distributed.tensor.parallel.style).

A style says how one module runs tensor-parallel: how its parameters lie on the mesh, what layout its inputs are taken
in and moved to, and what layout its outputs are moved to. parallelize_module applies styles by module name.

The controller runs one program on global tensors, so inputs and outputs stay global dtorch Tensors: a torch.Tensor
given to a style is the whole value in the layout the style names (distributed that way), never one rank's part, and
use_local_output keeps its default and meaning for code that reads it but changes nothing: the output is the global
dtorch.Tensor in the layout named, so model code written for one device computes with global shapes unchanged. On a
mesh of several dimensions a style applies along the dimension named "tp", else the last (see _layouts)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import partial
from typing import Any

import torch as _torch
from torch import nn

from .._distribute_module import distribute_module, distributed_parameter
from .._tensor import Tensor
from ..distributed_spec import DeviceMesh, Placement, Replicate, Shard
from ._layouts import along, annotate, move

__all__ = ["ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel", "PrepareModuleInput",
           "PrepareModuleOutput", "PrepareModuleInputOutput"]


def _placement(value: Any, what: str, optional: bool = True) -> Placement | None:
    if value is None and optional:
        return None
    if not isinstance(value, Placement):
        raise TypeError("%s must be a Placement (Shard, Replicate or Partial)%s, got %r"
                        % (what, " or None" if optional else "", value))
    return value


def _layouts(value: Any, what: str) -> tuple[Placement | None, ...] | None:
    """One placement or a sequence of them (None for an argument left alone) as a tuple; None stays None."""
    if value is None:
        return None
    if isinstance(value, Placement):
        return (value,)
    if not isinstance(value, (tuple, list)):
        raise TypeError("%s must be a Placement or a tuple of Placements (None for an input left as it is), got %r"
                        % (what, value))
    return tuple(_placement(v, "%s[%d]" % (what, i)) for i, v in enumerate(value))


def _first_input(inputs: tuple, what: str) -> Any:
    if not inputs:
        raise ValueError("%s: the module was called without a positional input" % what)
    return inputs[0]


class ParallelStyle(ABC):
    """How a module runs tensor-parallel; parallelize_module calls _apply(module, device_mesh), which returns the
    module. src_data_rank is PyTorch's rank that broadcasts the values; the controller holds every value itself, so it
    is kept for code that sets it and changes nothing."""

    src_data_rank: int | None = 0

    # True for styles that distribute the module's parameters (distribute_module), which a module takes once.
    _distributes = False

    @abstractmethod
    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        ...

    def _check(self, module: nn.Module) -> None:
        """Refuses a module this style cannot apply to, before parallelize_module changes anything."""


class _LinearOrEmbedding(ParallelStyle):
    """The shared part of ColwiseParallel and RowwiseParallel: nn.Linear and nn.Embedding only."""

    _distributes = True

    def __init__(self, input_layouts: Placement, output_layouts: Placement, use_local_output: bool) -> None:
        super().__init__()
        self.input_layouts = (input_layouts,)
        self.output_layouts = (output_layouts,)
        self.use_local_output = bool(use_local_output)

    def _check(self, module: nn.Module) -> None:
        if not isinstance(module, (nn.Linear, nn.Embedding)):
            raise NotImplementedError("%s supports nn.Linear and nn.Embedding only, got %s"
                                      % (type(self).__name__, type(module).__name__))

    @staticmethod
    def _prepare_input_fn(input_layouts, desired_input_layouts, mod, inputs, device_mesh):
        """The first input as a dtorch.Tensor laid out as desired along the tensor-parallel dimension: a torch.Tensor
        is taken as the global value in input_layouts; a dtorch.Tensor as it is."""
        name = type(mod).__name__
        tensor = annotate(_first_input(inputs, name), device_mesh, input_layouts[0], "input of " + name)
        return (move(tensor, device_mesh, desired_input_layouts[0]),) + tuple(inputs[1:])

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        """The output moved to output_layouts along the tensor-parallel dimension; it stays a global dtorch.Tensor
        whatever use_local_output says (see the module's docstring)."""
        return move(outputs, device_mesh, output_layouts[0])

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        self._check(module)
        if isinstance(module, nn.Linear):
            partition_fn = self._partition_linear_fn
            desired = self._desired_input_layouts_linear
        else:
            partition_fn = self._partition_embedding_fn
            desired = self._desired_input_layouts_embedding
        self.desired_input_layouts = desired
        return distribute_module(module, device_mesh, partition_fn,
                                 partial(self._prepare_input_fn, self.input_layouts, desired),
                                 partial(self._prepare_output_fn, self.output_layouts, self.use_local_output))

    @staticmethod
    def _shard_own_parameters(module: nn.Module, device_mesh: DeviceMesh, placement: Placement) -> None:
        for name, param in list(module.named_parameters(recurse=False)):
            module.register_parameter(name, distributed_parameter(param, device_mesh, along(device_mesh, placement)))


class ColwiseParallel(_LinearOrEmbedding):
    """Shards an nn.Linear by output features (weight and bias Shard(0)) or an nn.Embedding by embedding dimension
    (weight Shard(1)). The input is taken in input_layouts (default Replicate()) and replicated; the output, sharded on
    its last dimension, is moved to output_layouts (default Shard(-1)). Pairs with RowwiseParallel (an MLP's first
    layers, attention's q, k, v)."""

    _desired_input_layouts_linear = (Replicate(),)
    _desired_input_layouts_embedding = (Replicate(),)

    def __init__(self, *, input_layouts: Placement | None = None, output_layouts: Placement | None = None,
                 use_local_output: bool = True) -> None:
        super().__init__(_placement(input_layouts, "input_layouts") or Replicate(),
                         _placement(output_layouts, "output_layouts") or Shard(-1), use_local_output)
        self.desired_input_layouts = (Replicate(),)

    def _partition_linear_fn(self, name: str, module: nn.Module, device_mesh: DeviceMesh) -> None:
        self._shard_own_parameters(module, device_mesh, Shard(0))

    def _partition_embedding_fn(self, name: str, module: nn.Module, device_mesh: DeviceMesh) -> None:
        self._shard_own_parameters(module, device_mesh, Shard(1))

    def __repr__(self) -> str:
        return "ColwiseParallel(input_layouts=%r, output_layouts=%r, use_local_output=%r)" % (
            self.input_layouts[0], self.output_layouts[0], self.use_local_output)


class RowwiseParallel(_LinearOrEmbedding):
    """Shards an nn.Linear by input features (weight Shard(1), bias replicated) or an nn.Embedding by rows (weight
    Shard(0)). The input is taken in input_layouts (default Shard(-1)) and moved to Shard(-1) for a Linear, Replicate()
    for an Embedding; the partial sums are reduced into output_layouts (default Replicate(); Shard(d) reduce-scatters).
    Pairs with ColwiseParallel (an MLP's last layer, attention's output projection)."""

    _desired_input_layouts_linear = (Shard(-1),)
    _desired_input_layouts_embedding = (Replicate(),)

    def __init__(self, *, input_layouts: Placement | None = None, output_layouts: Placement | None = None,
                 use_local_output: bool = True) -> None:
        super().__init__(_placement(input_layouts, "input_layouts") or Shard(-1),
                         _placement(output_layouts, "output_layouts") or Replicate(), use_local_output)

    def _partition_linear_fn(self, name: str, module: nn.Module, device_mesh: DeviceMesh) -> None:
        module.register_parameter("weight", distributed_parameter(module.weight, device_mesh,
                                                                  along(device_mesh, Shard(1))))
        if getattr(module, "bias", None) is not None:
            module.register_parameter("bias", distributed_parameter(module.bias, device_mesh,
                                                                    along(device_mesh, Replicate())))

    def _partition_embedding_fn(self, name: str, module: nn.Module, device_mesh: DeviceMesh) -> None:
        self._shard_own_parameters(module, device_mesh, Shard(0))

    def __repr__(self) -> str:
        return "RowwiseParallel(input_layouts=%r, output_layouts=%r, use_local_output=%r)" % (
            self.input_layouts[0], self.output_layouts[0], self.use_local_output)


class SequenceParallel(ParallelStyle):
    """Replicates a module's parameters (a norm's weight and bias) and runs it on its input sharded on the sequence
    dimension: the first input comes in as Shard(sequence_dim) (a torch.Tensor is the global value, distributed so; a
    dtorch.Tensor of another layout is moved there) and the output leaves Shard(sequence_dim). For modules that compute
    per position: nn.LayerNorm, nn.RMSNorm, nn.Dropout (any module is taken, as in PyTorch)."""

    _distributes = True

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False) -> None:
        super().__init__()
        if isinstance(sequence_dim, bool) or not isinstance(sequence_dim, int):
            raise TypeError("sequence_dim must be an int, got %r" % (sequence_dim,))
        self.sequence_dim = sequence_dim
        self.use_local_output = bool(use_local_output)

    def _replicate_module_fn(self, name: str, module: nn.Module, device_mesh: DeviceMesh) -> None:
        for p_name, param in list(module.named_parameters(recurse=False)):
            module.register_parameter(p_name, distributed_parameter(param, device_mesh, along(device_mesh, Replicate())))

    @staticmethod
    def _prepare_input_fn(sequence_dim, mod, inputs, device_mesh):
        first = _first_input(inputs, type(mod).__name__)
        if not isinstance(first, (Tensor, _torch.Tensor)):
            raise ValueError("expecting the input of %s to be a torch.Tensor or a dtorch.Tensor, got %r"
                             % (type(mod).__name__, type(first).__name__))
        tensor = annotate(first, device_mesh, Shard(sequence_dim), "input of " + type(mod).__name__)
        return (move(tensor, device_mesh, Shard(sequence_dim)),) + tuple(inputs[1:])

    @staticmethod
    def _prepare_output_fn(use_local_output, sequence_dim, mod, outputs, device_mesh):
        if isinstance(outputs, Tensor):
            return move(outputs, device_mesh, Shard(sequence_dim))
        return outputs

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return distribute_module(module, device_mesh, self._replicate_module_fn,
                                 partial(self._prepare_input_fn, self.sequence_dim),
                                 partial(self._prepare_output_fn, self.use_local_output, self.sequence_dim))

    def __repr__(self) -> str:
        return "SequenceParallel(sequence_dim=%r, use_local_output=%r)" % (self.sequence_dim, self.use_local_output)


def _prepare(value: Any, mesh: DeviceMesh, layout: Placement | None, desired: Placement | None, what: str) -> Any:
    """One input or output of PrepareModuleInput/Output: left alone without a layout; otherwise a dtorch.Tensor (a
    torch.Tensor is the global value in `layout`), moved to `desired` along the tensor-parallel dimension if given."""
    if layout is None:
        return value
    tensor = annotate(value, mesh, layout, what)
    return tensor if desired is None else move(tensor, mesh, desired)


class PrepareModuleInput(ParallelStyle):
    """Lays a module's inputs out before its forward: input_layouts (a Placement or a tuple, None for an input left
    alone) says how each positional input is taken, desired_input_layouts where it goes; input_kwarg_layouts and
    desired_input_kwarg_layouts do the same for keyword inputs by name. Any module is taken."""

    def __init__(self, *, input_layouts: Any = None, desired_input_layouts: Any = None,
                 input_kwarg_layouts: dict[str, Placement] | None = None,
                 desired_input_kwarg_layouts: dict[str, Placement] | None = None,
                 use_local_output: bool = False) -> None:
        self.input_layouts = _layouts(input_layouts, "input_layouts")
        self.desired_input_layouts = _layouts(desired_input_layouts, "desired_input_layouts")
        self.use_local_output = bool(use_local_output)
        if self.input_layouts is not None:
            if self.desired_input_layouts is None:
                raise ValueError("PrepareModuleInput: desired_input_layouts must be given with input_layouts")
            if len(self.input_layouts) != len(self.desired_input_layouts):
                raise ValueError("PrepareModuleInput: input_layouts (%d) and desired_input_layouts (%d) must have the "
                                 "same length" % (len(self.input_layouts), len(self.desired_input_layouts)))
        self.with_kwargs = input_kwarg_layouts is not None
        self.input_kwarg_layouts = self._kwarg_layouts(input_kwarg_layouts, "input_kwarg_layouts")
        self.desired_input_kwarg_layouts = self._kwarg_layouts(desired_input_kwarg_layouts, "desired_input_kwarg_layouts")
        if self.with_kwargs and len(self.input_kwarg_layouts) != len(self.desired_input_kwarg_layouts):
            raise ValueError("PrepareModuleInput: input_kwarg_layouts and desired_input_kwarg_layouts must have the same "
                             "length")

    @staticmethod
    def _kwarg_layouts(value: Any, what: str) -> dict[str, Placement | None]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise TypeError("%s must be a dict of keyword name -> Placement, got %r" % (what, value))
        return {k: _placement(v, "%s[%r]" % (what, k)) for k, v in value.items()}

    def _prepare_input_fn(self, inputs: Any, device_mesh: DeviceMesh) -> Any:
        if self.input_layouts is None:
            return inputs
        if not isinstance(inputs, tuple):
            inputs = (inputs,)
        if len(inputs) != len(self.input_layouts):
            raise ValueError("module inputs and input_layouts should have the same length: %d inputs, %d layouts"
                             % (len(inputs), len(self.input_layouts)))
        return tuple(_prepare(value, device_mesh, layout, desired, "input %d" % i) for i, (value, layout, desired)
                     in enumerate(zip(inputs, self.input_layouts, self.desired_input_layouts)))

    def _prepare_input_kwarg_fn(self, inputs: Any, kwargs: dict, device_mesh: DeviceMesh) -> tuple[Any, dict]:
        args = self._prepare_input_fn(inputs, device_mesh)
        prepared = {key: _prepare(value, device_mesh, self.input_kwarg_layouts.get(key),
                                  self.desired_input_kwarg_layouts.get(key), "keyword input %r" % key)
                    for key, value in kwargs.items()}
        return args, prepared

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        if self.with_kwargs:
            module.register_forward_pre_hook(
                lambda _mod, inputs, kwargs: self._prepare_input_kwarg_fn(inputs, kwargs, device_mesh), with_kwargs=True)
        else:
            module.register_forward_pre_hook(lambda _mod, inputs: self._prepare_input_fn(inputs, device_mesh))
        return module

    def __repr__(self) -> str:
        return ("PrepareModuleInput(input_layouts=%r, desired_input_layouts=%r, input_kwarg_layouts=%r, "
                "desired_input_kwarg_layouts=%r, use_local_output=%r)" % (
                    self.input_layouts, self.desired_input_layouts, self.input_kwarg_layouts,
                    self.desired_input_kwarg_layouts, self.use_local_output))


class PrepareModuleOutput(ParallelStyle):
    """Lays a module's outputs out after its forward: output_layouts (a Placement or a tuple, None for an output left
    alone) says how each output is taken, desired_output_layouts where it goes. One output comes back as a value,
    several as a tuple. Any module is taken."""

    def __init__(self, *, output_layouts: Any, desired_output_layouts: Any, use_local_output: bool = True) -> None:
        self.output_layouts = _layouts(output_layouts, "output_layouts")
        self.desired_output_layouts = _layouts(desired_output_layouts, "desired_output_layouts")
        if self.output_layouts is None or self.desired_output_layouts is None:
            raise ValueError("PrepareModuleOutput: output_layouts and desired_output_layouts must be given")
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise ValueError("PrepareModuleOutput: output_layouts (%d) and desired_output_layouts (%d) must have the "
                             "same length" % (len(self.output_layouts), len(self.desired_output_layouts)))
        self.use_local_output = bool(use_local_output)

    def _prepare_out_fn(self, outputs: Any, device_mesh: DeviceMesh) -> Any:
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        if len(outputs) != len(self.output_layouts):
            raise ValueError("module outputs and output_layouts should have the same length: %d outputs, %d layouts"
                             % (len(outputs), len(self.output_layouts)))
        prepared = tuple(_prepare(value, device_mesh, layout, desired, "output %d" % i) for i, (value, layout, desired)
                         in enumerate(zip(outputs, self.output_layouts, self.desired_output_layouts)))
        return prepared[0] if len(prepared) == 1 else prepared

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        module.register_forward_hook(lambda _mod, _inputs, outputs: self._prepare_out_fn(outputs, device_mesh))
        return module

    def __repr__(self) -> str:
        return "PrepareModuleOutput(output_layouts=%r, desired_output_layouts=%r, use_local_output=%r)" % (
            self.output_layouts, self.desired_output_layouts, self.use_local_output)


class PrepareModuleInputOutput(ParallelStyle):
    """PrepareModuleInput and PrepareModuleOutput on one module (one plan entry), with their arguments; use_local_input
    is PrepareModuleInput's use_local_output."""

    def __init__(self, *, input_layouts: Any = None, desired_input_layouts: Any = None,
                 input_kwarg_layouts: dict[str, Placement] | None = None,
                 desired_input_kwarg_layouts: dict[str, Placement] | None = None, use_local_input: bool = False,
                 output_layouts: Any, desired_output_layouts: Any, use_local_output: bool = True) -> None:
        self.prepare_module_input = PrepareModuleInput(
            input_layouts=input_layouts, desired_input_layouts=desired_input_layouts,
            input_kwarg_layouts=input_kwarg_layouts, desired_input_kwarg_layouts=desired_input_kwarg_layouts,
            use_local_output=use_local_input)
        self.prepare_module_output = PrepareModuleOutput(
            output_layouts=output_layouts, desired_output_layouts=desired_output_layouts,
            use_local_output=use_local_output)

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        self.prepare_module_input._apply(module, device_mesh)
        self.prepare_module_output._apply(module, device_mesh)
        return module

    def __repr__(self) -> str:
        return "PrepareModuleInputOutput(%r, %r)" % (self.prepare_module_input, self.prepare_module_output)
