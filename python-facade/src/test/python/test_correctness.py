"""No silent wrong results: exact integers, torch's promotion, casts of partial values, meshes and dimensions."""

import dtorch
from dtorch import Partial, Replicate, Shard
from _testing import raises, run

BIG = 2 ** 62 + 1  # the nearest double is 2**62


def line():
    return dtorch.init_device_mesh("cpu", (4,))


def test_int64_values_stay_exact_end_to_end():
    mesh = line()
    filled = dtorch.full((4,), BIG, dtype=dtorch.int64, device_mesh=mesh, placements=[Shard(0)])
    assert filled.to_torch().tolist() == [BIG] * 4
    assert dtorch.full((2,), BIG).dtype == dtorch.int64 and dtorch.full((2,), BIG).to_torch().tolist() == [BIG, BIG]
    made = dtorch.tensor([BIG, -BIG, 3], device_mesh=dtorch.DeviceMesh("cpu", [0, 1, 2]), placements=[Shard(0)])
    assert made.to_torch().tolist() == [BIG, -BIG, 3]
    zero = dtorch.zeros(4, dtype=dtorch.int64, device_mesh=mesh, placements=[Shard(0)])
    assert (zero + BIG).to_torch().tolist() == [BIG] * 4
    assert (BIG + zero).to_torch().tolist() == [BIG] * 4
    assert (zero - BIG).to_torch().tolist() == [-BIG] * 4
    assert (BIG - zero).to_torch().tolist() == [BIG] * 4
    one = dtorch.ones(1, dtype=dtorch.int64)
    assert (one * BIG).to_torch().item() == BIG
    assert (one * BIG).sum().to_torch().item() == BIG
    assert dtorch.arange(BIG, BIG + 4, device_mesh=mesh, placements=[Shard(0)]).to_torch().tolist() == [BIG + i for i in range(4)]
    assert str(BIG) in repr(made.to_torch())


def test_integers_beyond_int64_are_refused():
    raises(OverflowError, dtorch.full, (2,), 2 ** 63)
    raises(OverflowError, dtorch.tensor, [2 ** 64])
    raises(OverflowError, lambda: dtorch.ones(2, dtype=dtorch.int64) + 2 ** 63)
    raises(OverflowError, dtorch.zeros, 2 ** 63)
    raises(ValueError, lambda: dtorch.ones(2, dtype=dtorch.int8) + 1000, contains="int8")
    raises(ValueError, dtorch.tensor, [300], dtype=dtorch.uint8)
    raises(ValueError, dtorch.full, (2,), -1, dtype=dtorch.uint8)


def test_python_scalars_promote_as_in_torch():
    i32 = dtorch.ones(2, dtype=dtorch.int32)
    assert (i32 + 2).dtype == dtorch.int32 and (i32 + 2).to_torch().tolist() == [3, 3]
    assert (i32 * 2.5).dtype == dtorch.float32 and (i32 * 2.5).to_torch().tolist() == [2.5, 2.5]
    assert (i32 / 2).dtype == dtorch.float32
    b = dtorch.tensor([True, False])
    assert (b + 1).dtype == dtorch.int64 and (b + 1).to_torch().tolist() == [2, 1]
    assert (b * True).dtype == dtorch.bool and (b * True).to_torch().tolist() == [True, False]
    assert (b + 0.5).dtype == dtorch.float32
    h = dtorch.ones(2, dtype=dtorch.float16)
    assert (h + 1).dtype == dtorch.float16 and (h * 2.0).dtype == dtorch.float16
    assert (i32 + True).dtype == dtorch.int32
    assert dtorch.tensor([1.5, -2.7], dtype=dtorch.int64).to_torch().tolist() == [1, -2]


def test_casts_that_do_not_commute_with_the_partial_reduction_reduce_first_or_are_refused_when_strict():
    pair = dtorch.DeviceMesh("cpu", [0, 1])
    partial = dtorch.tensor([1, -1], device_mesh=pair, placements=[Shard(0)]).sum()
    assert partial.placements == (Partial("sum"),)
    assert partial.to(dtorch.bool).to_torch().item() is False
    dtorch.set_implicit_redistribution(False)
    try:
        assert not dtorch.implicit_redistribution()
        e = raises(dtorch.ShardingError, partial.to, dtorch.bool, contains="to(bool)")
    finally:
        dtorch.set_implicit_redistribution(True)
    assert "Replicate" in str(e), str(e)
    assert partial.redistribute(pair, [Replicate()]).to(dtorch.bool).to_torch().item() is False
    assert partial.to(dtorch.float64).redistribute(pair, [Replicate()]).to_torch().item() == 0.0


def test_meshes_refuse_what_they_would_misread():
    raises(TypeError, dtorch.DeviceMesh, "cpu", [0.7, 1.2])
    raises(TypeError, dtorch.DeviceMesh, "cpu", [True, False])
    raises(TypeError, dtorch.DeviceMesh, "cpu", ["0", "1"])
    raises(ValueError, dtorch.DeviceMesh, "cpu", [0, -1])
    raises(ValueError, dtorch.DeviceMesh, "cpu", [0, 0])
    raises(ValueError, dtorch.DeviceMesh, "cpu", [[0, 1], [2]])
    raises(ValueError, dtorch.DeviceMesh, "cpu", [0, [1, 2]])
    raises(ValueError, dtorch.DeviceMesh, "cpu", [[0, 1], 2])
    raises(ValueError, dtorch.DeviceMesh, "cpu", [])
    raises(TypeError, dtorch.DeviceMesh, "cpu", [0, 1], mesh_dim_names="dp")
    raises(TypeError, dtorch.DeviceMesh, "cpu", [0, 1], mesh_dim_names=[0])
    raises(ValueError, dtorch.DeviceMesh, "cpu", [0, 1], mesh_dim_names=("dp", "tp"))
    raises(ValueError, dtorch.DeviceMesh, "cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp", "dp"))
    raises(TypeError, dtorch.init_device_mesh, "cpu", (4,), mesh_dim_names="dp")
    raises(TypeError, dtorch.init_device_mesh, "cpu", (2.0, 2))
    raises(TypeError, dtorch.init_device_mesh, "cpu", (True, 2))
    raises(ValueError, dtorch.init_device_mesh, "cpu", (0, 2))
    assert dtorch.DeviceMesh("cpu", (0, 1), mesh_dim_names=("dp",)).mesh_dim_names == ("dp",)
    assert dtorch.init_device_mesh("cpu", 4, mesh_dim_names=["dp"]).mesh_dim_names == ("dp",)


def test_shard_takes_negative_dims_and_refuses_bools():
    mesh = line()
    t = dtorch.zeros(4, 8, device_mesh=mesh, placements=[Shard(-1)])
    assert t.placements == (Shard(1),)
    assert t.redistribute(mesh, [Shard(-2)]).placements == (Shard(0),)
    assert dtorch.tensor([[1, 2], [3, 4]], device_mesh=dtorch.DeviceMesh("cpu", [0, 1]), placements=[Shard(-1)]).placements == (Shard(1),)
    raises(TypeError, Shard, True)
    raises(TypeError, Shard, 1.0)
    raises(ValueError, dtorch.zeros, 2, 8, device_mesh=mesh, placements=[Shard(-3)])


def test_dimensions_count_from_the_end_and_must_be_integers():
    x = dtorch.arange(8, dtype=dtorch.float32).reshape(2, 4)
    assert x.size(-1) == 4 and x.size(-2) == 2
    e = raises(IndexError, x.size, 2)
    assert "expected to be in range of [-2, 1]" in str(e), str(e)
    assert x.sum(-1).to_torch().tolist() == [6.0, 22.0]
    assert x.narrow(-1, -2, 2).to_torch().tolist() == [[2.0, 3.0], [6.0, 7.0]]
    raises(IndexError, x.sum, 2)
    raises(IndexError, x.softmax, -3)
    raises(TypeError, x.softmax, 1.5)
    raises(TypeError, x.sum, 0.5)
    raises(TypeError, x.narrow, 1.0, 0, 1)
    raises(TypeError, x.transpose, 0, True)
    raises(TypeError, x.reshape, 4, 2.0)
    raises(TypeError, dtorch.cat, [x, x], 0.0)


run(globals())
