"""dtorch: a single-controller distributed tensor runtime, driven from Python (GraalPy) and run by the JVM.

    import dtorch
    from dtorch import Shard, Replicate

    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = dtorch.randn(8, 16, device_mesh=mesh, placements=[Shard(0), Replicate()])
    y = (x * 2).relu().sum(1)
    print(y.to_torch().tolist())
"""

from ._bridge import DTorchError, ShardingError
from ._dtypes import (dtype, float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool, float,
                      double, half, long, int)
from ._future import TensorFuture
from ._host import HostTensor
from ._tensor import (Tensor, zeros, ones, empty, full, rand, randn, arange, tensor, manual_seed, linear, matmul, einsum,
                      relu, silu, gelu, redistribute, distribute_tensor, _GetTensorAsync, get_tensor_async, sync, device_count,
                      device_type)
from .distributed_spec import DeviceMesh, init_device_mesh, Placement, Shard, Replicate, Partial
from ._tensor import aten, set_implicit_redistribution, implicit_redistribution
from ._tensor import zeros_like, ones_like, empty_like, full_like, rand_like, randn_like
from ._tensor import from_local
from ._graph import dump_graph
from ._memory import memory_stats, reset_peak_memory_stats
from ._channel import Channel, channel
from ._distribute_module import distribute_module
from ._fully_shard import FSDPModule, fully_shard
from . import _autograd  # noqa: F401 - torch.autograd.grad and backward find distributed tensors through it
from . import _isolation, checkpoint, nn, plot, profiler, safetensors
from .safetensors import load_state_dict, save_state_dict

_isolation.install()


def __getattr__(name):
    """Any other ATen operator by name: dtorch.where(c, x, y), dtorch.amax(t, 1) (the generic path, _tensor.aten)."""
    from ._tensor import _has_op
    if name.startswith("_") or not _has_op(name):
        raise AttributeError("module 'dtorch' has no attribute %r" % (name,))

    def function(*args, **kwargs):
        return aten(name, args, kwargs)

    function.__name__ = name
    return function

__all__ = [
    "DTorchError", "ShardingError", "dtype", "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
    "uint8", "bool", "float", "double", "half", "long", "int", "TensorFuture", "HostTensor", "Tensor", "zeros", "ones",
    "empty", "full", "rand", "randn", "arange", "tensor", "manual_seed", "linear", "matmul", "cat", "relu", "silu", "gelu",
    "softmax", "redistribute", "distribute_tensor", "_GetTensorAsync", "get_tensor_async", "sync", "device_count", "device_type",
    "DeviceMesh", "init_device_mesh", "Placement", "Shard", "Replicate", "Partial", "aten", "nn",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "einsum",
    "memory_stats", "reset_peak_memory_stats", "dump_graph", "Channel", "channel", "profiler", "from_local",
    "set_implicit_redistribution", "implicit_redistribution", "safetensors", "load_state_dict", "save_state_dict",
    "distribute_module", "fully_shard", "FSDPModule", "checkpoint", "plot",
]
