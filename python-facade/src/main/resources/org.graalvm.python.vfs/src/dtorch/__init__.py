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
from ._tensor import (Tensor, zeros, ones, empty, full, rand, randn, arange, tensor, manual_seed, linear, matmul, cat,
                      relu, silu, gelu, softmax, redistribute, distribute_tensor, _GetTensorAsync, get_tensor_async, sync, device_count,
                      device_type)
from .distributed_spec import DeviceMesh, init_device_mesh, Placement, Shard, Replicate, Partial
from . import _isolation

_isolation.install()

__all__ = [
    "DTorchError", "ShardingError", "dtype", "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
    "uint8", "bool", "float", "double", "half", "long", "int", "TensorFuture", "HostTensor", "Tensor", "zeros", "ones",
    "empty", "full", "rand", "randn", "arange", "tensor", "manual_seed", "linear", "matmul", "cat", "relu", "silu", "gelu",
    "softmax", "redistribute", "distribute_tensor", "_GetTensorAsync", "get_tensor_async", "sync", "device_count", "device_type",
    "DeviceMesh", "init_device_mesh", "Placement", "Shard", "Replicate", "Partial",
]
