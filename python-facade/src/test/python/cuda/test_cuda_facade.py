"""The facade on a same-device CUDA runtime (4 ranks on cuda:0), run by PythonCudaScriptsTest where CUDA is available:
meshes in both forms, factories, operators and collectives, values back on the host."""

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dtorch  # noqa: E402
from dtorch import Partial, Replicate, Shard  # noqa: E402
from _testing import close, raises, run  # noqa: E402


def test_the_runtime_is_four_ranks_of_cuda():
    assert dtorch.device_type() == "cuda" and dtorch.device_count() == 4


def test_repeated_gpu_ids_are_the_logical_devices_in_row_major_order():
    made = dtorch.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    repeated = dtorch.DeviceMesh("cuda", [[0, 0], [0, 0]], mesh_dim_names=("dp", "tp"))
    assert repeated == made and repeated.mesh == [[0, 1], [2, 3]] and repeated.device_ids == [0, 1, 2, 3]
    assert repr(repeated) == "DeviceMesh(cuda, [[0, 1], [2, 3]], dims=[dp, tp])"
    assert dtorch.DeviceMesh("cuda", [0, 0]).device_ids == [0, 1]
    assert dtorch.DeviceMesh("cuda", [[0, 1], [2, 3]]) == dtorch.init_device_mesh("cuda", (2, 2))
    assert dtorch.DeviceMesh("gpu", [3, 2]).device_ids == [3, 2]
    raises(ValueError, dtorch.DeviceMesh, "cuda", [[0, 0], [1, 1]], contains="repeats 0 for every rank")
    raises(ValueError, dtorch.DeviceMesh, "cuda", [1, 1], contains="every rank runs on cuda:0")
    raises(ValueError, dtorch.DeviceMesh, "cuda", [0] * 5, contains="--devices cuda:5 --same-device")


def test_factories_operators_and_collectives_give_host_values():
    mesh = dtorch.DeviceMesh("cuda", [[0, 0], [0, 0]], mesh_dim_names=("dp", "tp"))
    x = dtorch.arange(16, dtype=dtorch.float32).reshape(4, 4).redistribute(mesh, [Shard(0), Replicate()])
    expected = [[float(4 * r + c) for c in range(4)] for r in range(4)]
    assert x.to_torch().tolist() == expected
    s = x.redistribute(mesh, [Shard(0), Shard(1)])                      # a local slice along tp
    assert s.redistribute(mesh, [Replicate(), Replicate()]).to_torch().tolist() == expected  # all-gathers
    assert (s * 2 + 1).to_torch().tolist() == [[2 * v + 1 for v in row] for row in expected]
    w = dtorch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]], device_mesh=mesh, placements=[Replicate(), Shard(0)])
    xs = x.redistribute(mesh, [Replicate(), Shard(1)])
    partial = xs @ w                                                      # contracting the tp-split dim: Partial over tp
    assert partial.placements == (Replicate(), Partial())
    product = [[row[0] + row[2], row[1] + row[2]] for row in expected]
    assert partial.redistribute(mesh, [Replicate(), Replicate()]).to_torch().tolist() == product  # all-reduce
    assert x.sum().to_torch().item() == 120.0 and x.max(1).values.to_torch().tolist() == [3.0, 7.0, 11.0, 15.0]
    close(x.softmax(1).to_torch().tolist()[0], [0.0320586, 0.0871443, 0.2368828, 0.6439143])


def test_random_factories_match_a_cpu_draw_and_values_come_back_through_every_path():
    mesh = dtorch.init_device_mesh("cuda", (4,))
    a = dtorch.randn(8, 4, seed=11, device_mesh=mesh, placements=[Shard(0)])
    b = dtorch.randn(8, 4, seed=11)
    host = a.to_torch()
    assert host.tolist() == b.to_torch().tolist(), "the same seed gives the same values whatever the mesh"
    view = host.memoryview()
    assert view.shape == (8, 4) and view[0, 0] == host.tolist()[0][0]
    back = dtorch.tensor(host, device_mesh=mesh, placements=[Shard(1)])   # a host value goes back to the GPU
    assert back.to_torch().tolist() == host.tolist()
    value = asyncio.run(_awaited((a * 0 + 5).sum()))
    assert value == 160.0
    assert dtorch.tensor([300, -7], dtype=dtorch.int64, device_mesh=mesh).to_torch().tolist() == [300, -7]


def test_a_cpu_mesh_is_the_workers_host_memory_and_tensors_move_between_it_and_the_gpus():
    gpus = dtorch.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    hosts = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    assert hosts.device_type == "cpu" and hosts.device_ids == [0, 1, 2, 3] and hosts != gpus
    assert dtorch.DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "tp")) == hosts
    expected = [[float(4 * r + c) for c in range(4)] for r in range(4)]
    x = dtorch.arange(16, dtype=dtorch.float32).reshape(4, 4).redistribute(gpus, [Shard(0), Shard(1)])
    on_host = x.redistribute(hosts, [Replicate(), Shard(0)])
    assert on_host.device_mesh == hosts and on_host.device_mesh.device_type == "cpu"
    assert on_host.to_torch().tolist() == expected
    back = on_host.redistribute(gpus, [Shard(1), Replicate()])
    assert back.device_mesh.device_type == "cuda" and back.to_torch().tolist() == expected
    made = dtorch.randn(8, 4, seed=5, device_mesh=hosts, placements=[Shard(0), Replicate()])
    assert made.to_torch().tolist() == dtorch.randn(8, 4, seed=5, device_mesh=gpus).to_torch().tolist()
    target = dtorch.zeros(8, 4, device_mesh=gpus, placements=[Replicate(), Shard(1)])
    target.copy_(made)
    assert target.to_torch().tolist() == made.to_torch().tolist()
    raises(ValueError, lambda: on_host + 1, contains="redistribute the tensor to a cuda mesh first")


async def _awaited(t):
    return (await t.to_torch_async()).item()


run(globals())
