"""dtorch.parallel: the parallel mesh of a model (ParallelConfig) and tensor parallelism on torch.nn modules with
PyTorch's names (torch.distributed.tensor.parallel): parallelize_module and the parallel styles.

    from dtorch.parallel import ParallelConfig, parallelize_module, ColwiseParallel, RowwiseParallel
    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
    parallelize_module(mlp, mesh, {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()})
    y = mlp(x)                  # x a torch.Tensor or a dtorch.Tensor; y a replicated dtorch.Tensor of global shape

parameter_layouts(module) gives each parameter's mesh and placements afterwards."""

from ._config import ParallelConfig
from .api import ParameterLayout, parallelize_module, parameter_layouts
from .style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleInputOutput, PrepareModuleOutput,
                    RowwiseParallel, SequenceParallel)

__all__ = ["ParallelConfig", "parallelize_module", "parameter_layouts", "ParameterLayout", "ParallelStyle",
           "ColwiseParallel", "RowwiseParallel", "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput",
           "PrepareModuleInputOutput"]
