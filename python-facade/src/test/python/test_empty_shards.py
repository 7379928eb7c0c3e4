"""Empty shards, as a user meets them: a dimension shorter than the devices that split it gives the last devices
zero-size shards (a batch of 2 on 4 devices is 1, 1, 0, 0), as PyTorch's DTensor does. Factories, operators,
reductions over the sharded dimension, redistribution, to_torch(), printing and indexing work on such tensors and on
tensors with no element at all, compared with torch on one device."""

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import run


def mesh4():
    return dtorch.init_device_mesh("cpu", (4,))


def same(got, want, what, tolerance=1e-5):
    assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    ok = torch.allclose(got, want, atol=tolerance) if want.dtype.is_floating_point else torch.equal(got, want)
    assert ok, (what, got.tolist(), want.tolist())


def test_a_batch_of_two_on_four_devices_matches_torch():
    mesh = mesh4()
    dx = dtorch.randn(2, 8, device_mesh=mesh, placements=[Shard(0)], seed=3)
    x = dx.to_torch()
    assert tuple(x.shape) == (2, 8)
    same(x, dtorch.randn(2, 8, seed=3).to_torch(), "the same seed gives the same values on one device")
    same((dx * 2 + 1).relu().to_torch(), (x * 2 + 1).relu(), "element-wise")
    same(dx.sum(0).to_torch(), x.sum(0), "sum over the sharded dim")
    same(dx.mean(0).to_torch(), x.mean(0), "mean over the sharded dim divides by the global count")
    same(dx.amax(0).to_torch(), x.amax(0), "amax over the sharded dim: the empty shards give -inf")
    same(dx.amin(0).to_torch(), x.amin(0), "amin over the sharded dim: the empty shards give +inf")
    same(dx.sum().to_torch(), x.sum(), "sum of everything")
    same(dx.softmax(-1).to_torch(), x.softmax(-1), "softmax beside the sharded dim")
    same(dx.redistribute(mesh, [Replicate()]).to_torch(), x, "to R")
    same(dx.redistribute(mesh, [Shard(1)]).to_torch(), x, "to S(1)")
    same(dx.redistribute(mesh, [Partial()]).redistribute(mesh, [Shard(0)]).to_torch(), x, "through P and back")


def test_integer_and_bool_extrema_give_their_identity_on_empty_shards():
    mesh = mesh4()
    ints = torch.tensor([[3, -7, 5], [-2, 9, 0]])
    di = dtorch.tensor(ints, device_mesh=mesh, placements=[Shard(0)])
    same(di.amax(0).to_torch(), ints.amax(0), "int amax")
    same(di.amin(0).to_torch(), ints.amin(0), "int amin")
    same(di.sum(0).to_torch(), ints.sum(0), "int sum")
    same(di.prod(0).to_torch(), ints.prod(0), "int prod")
    flags = torch.tensor([[True, False, True], [True, True, False]])
    df = dtorch.tensor(flags, device_mesh=mesh, placements=[Shard(0)])
    same(df.all(0).to_torch(), flags.all(0), "all")
    same(df.any(0).to_torch(), flags.any(0), "any")


def test_three_rows_on_a_two_by_two_mesh_sharded_twice():
    grid = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    dx = dtorch.tensor(x, device_mesh=grid, placements=[Shard(0), Shard(0)])
    same(dx.to_torch(), x, "round trip")
    same(dx.sum(0).to_torch(), x.sum(0), "sum")
    same(dx.max(0).values.to_torch(), x.max(0).values, "max over a dim")
    same(dx.max().to_torch(), x.max(), "max of everything: the empty shard gives -inf")
    same(dx.argmax(0).to_torch(), x.argmax(0), "argmax")
    same(dx.var(0).to_torch(), x.var(0), "var")
    same(dx.std(0).to_torch(), x.std(0), "std")
    same(dx.logsumexp(0).to_torch(), x.logsumexp(0), "logsumexp")
    same(dx.norm().to_torch(), x.norm(), "norm")
    same((dx @ dx.t()).to_torch(), x @ x.t(), "matmul")


def test_zero_length_narrow_and_tensors_with_no_element():
    mesh = mesh4()
    x = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    dx = dtorch.tensor(x, device_mesh=mesh, placements=[Shard(0)])
    nothing = dx.narrow(0, 2, 0)
    assert tuple(nothing.shape) == (0, 4)
    same(nothing.to_torch(), x.narrow(0, 2, 0), "a zero-length narrow")
    same(nothing.sum(0).to_torch(), x.narrow(0, 2, 0).sum(0), "the sum of nothing is zeros")
    empty = dtorch.zeros(0, 3, device_mesh=mesh, placements=[Shard(0)])
    assert tuple(empty.to_torch().shape) == (0, 3)
    three = torch.arange(3.0)
    same(dtorch.distribute_tensor(three, mesh, [Shard(0)]).to_torch(), three, "distribute_tensor of 3 over 4")
    same(dtorch.distribute_tensor(torch.zeros(0, 2), mesh, [Shard(1)]).to_torch(), torch.zeros(0, 2), "distribute_tensor of nothing")
    same((empty + 1).to_torch(), torch.zeros(0, 3) + 1, "an operator on nothing")


def test_printing_and_indexing():
    mesh = mesh4()
    x = torch.arange(16, dtype=torch.float32).reshape(2, 8)
    dx = dtorch.tensor(x, device_mesh=mesh, placements=[Shard(0)])
    text = repr(dx)
    for part in ("shape=(2, 8)", "Shard(dim=0)"):
        assert part in text, (part, text)
    empty = dtorch.zeros(0, 3, device_mesh=mesh, placements=[Shard(0)])
    assert "shape=(0, 3)" in repr(empty), repr(empty)
    assert repr(empty.to_torch()) == "tensor([], size=(0, 3))", repr(empty.to_torch())
    assert repr(torch.zeros(0)) == "tensor([])", repr(torch.zeros(0))
    # As PyTorch: no value shows the dtype, so an empty tensor names it unless it is float32.
    assert repr(torch.zeros(2, 0, dtype=torch.int64)) == "tensor([], size=(2, 0), dtype=torch.int64)", repr(torch.zeros(2, 0, dtype=torch.int64))
    assert repr(torch.zeros(0, dtype=torch.bool)) == "tensor([], dtype=torch.bool)", repr(torch.zeros(0, dtype=torch.bool))
    assert str(dx[2:2].to_torch()) == "tensor([], size=(0, 8))", str(dx[2:2].to_torch())
    assert empty.to_torch().tolist() == []
    host = empty.to_torch()
    assert host.memoryview().nbytes == 0 and host.memoryview().format == "f" and host.tobytes() == b"", "no bytes to view"
    same(dx[1].to_torch(), x[1], "an int index on the sharded dim")
    same(dx[1:5].to_torch(), x[1:5], "a slice past the end")
    same(dx[:, 2:6].to_torch(), x[:, 2:6], "a slice beside the sharded dim")
    same(dx[1:1].to_torch(), x[1:1], "an empty slice")
    rows = dtorch.arange(3, device_mesh=mesh, placements=[Shard(0)])
    same(rows[2].to_torch(), torch.arange(3)[2], "the last element, held by device 2 of 1, 1, 1, 0")


run(globals())
