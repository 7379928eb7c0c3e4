"""The local-shard API: dtorch.Tensor.from_local (one local torch tensor per device, in the mesh's device order), to_local
(every device's local tensor) and full_tensor, against slices and sums made with single-device torch on 1-d and 2-d
meshes with sharded (uneven included), replicated and partial placements; the checks before anything moves; and, in
thread mode, shared memory with the caller's tensors in both directions."""

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run


def equal(got, want, what):
    assert tuple(got.shape) == tuple(want.shape), (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert torch.equal(got.contiguous(), want.contiguous()), (what, got.tolist(), want.tolist())


def test_uneven_shards_round_trip():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = torch.randn(10, 3)
    locals_ = [x[0:3].clone(), x[3:6].clone(), x[6:8].clone(), x[8:10].clone()]  # the balanced split: 3, 3, 2, 2
    d = dtorch.Tensor.from_local(locals_, mesh, [Shard(0)])
    assert d.shape == (10, 3) and d.placements == (Shard(0),), (d.shape, d.placements)
    equal(d.to_torch(), x, "to_torch")
    equal(d.full_tensor(), x, "full_tensor")
    back = d.to_local()
    assert isinstance(back, list) and len(back) == 4
    for i in range(4):
        equal(back[i], locals_[i], "to_local of device %d" % i)
    given = dtorch.from_local(locals_, device_mesh=mesh, placements=[Shard(0)], shape=(10, 3))
    equal(given.to_torch(), x, "with the shape given")


def test_two_dimensional_mesh_with_shards_replicas_and_partial_values():
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn(5, 6)
    ids = mesh.device_ids
    coords = {i: (k // 2, k % 2) for k, i in enumerate(ids)}
    rows = {0: slice(0, 3), 1: slice(3, 5)}
    cols = {0: slice(0, 3), 1: slice(3, 6)}
    blocks = [x[rows[coords[i][0]], cols[coords[i][1]]].clone() for i in ids]
    d = dtorch.Tensor.from_local(blocks, mesh, [Shard(0), Shard(1)])
    equal(d.to_torch(), x, "[S(0), S(1)]")
    for i, t in enumerate(d.to_local()):
        equal(t, blocks[i], "to_local [S(0), S(1)] of device %d" % ids[i])
    a = torch.randn(5, 6)
    b = x - a
    partials = [(a if coords[i][0] == 0 else b)[:, cols[coords[i][1]]].clone() for i in ids]
    p = dtorch.Tensor.from_local(partials, mesh, [Partial(), Shard(1)])
    assert p.placements == (Partial(), Shard(1))
    assert torch.allclose(p.to_torch(), x, atol=1e-6)
    for i, t in enumerate(p.to_local()):
        equal(t, partials[i], "to_local gives the partial value of device %d" % ids[i])
    halves = [x[rows[coords[i][1]]].clone() for i in ids]
    r = dtorch.Tensor.from_local(halves, mesh, [Replicate(), Shard(0)], run_check=True)
    equal(r.to_torch(), x, "[R, S(0)] with the replica check")


def test_to_local_of_made_tensors_gives_each_device_its_part():
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.arange(24).reshape(4, 6)
    d = dtorch.Tensor(x, device_mesh=mesh, placements=[Replicate(), Shard(1)])
    for k, t in enumerate(d.to_local()):
        equal(t, x[:, (k % 2) * 3:(k % 2) * 3 + 3], "to_local [R, S(1)] of device %d" % k)
    s = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0), Replicate()]).sum(0)
    assert s.placements[0] == Partial()
    local_sums = s.to_local()
    equal(local_sums[0] + local_sums[2], x.sum(0), "the partial sums of the two mesh rows")


def test_zero_size_locals_are_taken_where_the_layout_says_so():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    d = dtorch.Tensor.from_local([torch.zeros(0, 2) for _ in range(4)], mesh, [Shard(1)])
    assert d.shape == (0, 8)
    equal(d.sum(0).to_torch(), torch.zeros(8), "the sum over no rows")
    assert tuple(d.to_local()[3].shape) == (0, 2)


def test_thread_mode_shares_memory_in_both_directions():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a, b = torch.zeros(2, 3), torch.zeros(2, 3)
    d = dtorch.Tensor.from_local([a, b], mesh, [Shard(0)])
    assert d.to_torch().sum().item() == 0.0
    b.add_(1.0)  # the device kept a reference, as PyTorch's from_local shares storage
    assert d.to_torch().sum().item() == 6.0
    first = d.to_local()[0]
    first.add_(1.0)  # to_local gives the worker's tensor itself, as PyTorch's to_local aliases the shard
    assert d.to_torch().sum().item() == 12.0
    assert a.sum().item() == 6.0, "to_local's tensor of device 0 is the tensor given to from_local"


def test_bad_locals_fail_before_anything_moves_naming_the_device():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    locals_ = [torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(2, 4)]
    raises(ValueError, dtorch.Tensor.from_local, locals_, mesh, [Shard(0)], shape=(10, 4),
           contains="the local tensor of device 2 has shape [3, 4]; the layout of shape [10, 4] under [S(0)]")
    raises(ValueError, dtorch.Tensor.from_local, locals_[:3], mesh, [Shard(0)], contains="3 local tensors for the 4 devices")
    mixed = [locals_[0], locals_[1], torch.zeros(3, 4, dtype=torch.int64), locals_[3]]
    raises(ValueError, dtorch.Tensor.from_local, mixed, mesh, [Shard(0)], contains="the local tensor of device 2 is int64[3, 4]")
    raises(TypeError, dtorch.Tensor.from_local, torch.zeros(3, 4), mesh, [Shard(0)], contains="a list of torch.Tensors")
    raises(TypeError, dtorch.Tensor.from_local, [dtorch.zeros(3, 4)] * 4, mesh, [Shard(0)], contains="must be a torch.Tensor")
    assert dtorch.Tensor.from_local(locals_, mesh, [Shard(0)]).shape == (11, 4)


def test_run_check_names_the_first_replica_that_differs():
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn(4, 2)
    locals_ = [x[0:2].clone(), x[2:4].clone(), x[0:2].clone(), x[2:4] + 1]
    raises(ValueError, dtorch.Tensor.from_local, locals_, mesh, [Replicate(), Shard(0)], run_check=True,
           contains="the local tensor of device 3 differs from device 1's, its replica along mesh dimension 0")
    d = dtorch.Tensor.from_local(locals_, mesh, [Replicate(), Shard(0)])  # taken as given
    equal(d.to_local()[3], locals_[3], "each device keeps the replica it was given")


def test_default_placements_replicate():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.randn(3)
    d = dtorch.Tensor.from_local([x, x.clone()], mesh)
    assert d.placements == (Replicate(),) and d.shape == (3,)
    equal(d.full_tensor(), x, "replicated")


run(globals())
