"""dtorch.parallel.ParallelConfig: the DP -> CFG -> SP(ring, ulysses) -> PP -> TP mesh over the runtime's 4 devices,
its group accessors, its errors, and distributed tensors on it compared with torch on one device."""

import dtorch
import torch
from dtorch import Replicate, Shard
from dtorch.parallel import ParallelConfig
from _testing import raises, run

NAMES = ("dp", "cfg", "ring", "ulysses", "pp", "tp")


def test_the_mesh_has_every_dimension_in_order():
    mesh = ParallelConfig(dp=1, cfg=1, ring=2, ulysses=2, pp=1, tp=1).device_mesh("cpu")
    assert mesh.mesh_dim_names == NAMES, mesh.mesh_dim_names
    assert mesh.shape == (1, 1, 2, 2, 1, 1), mesh.shape
    assert mesh.device_ids == [0, 1, 2, 3]
    assert mesh["ulysses"].device_ids == [0, 1]
    assert mesh["ring"].device_ids == [0, 2]
    assert mesh["ring", "ulysses"].shape == (2, 2)
    assert ParallelConfig(dp=2, tp=2).device_mesh().device_type == "cpu"  # the runtime's


def test_groups_are_the_ranks_a_rank_shares_a_step_with():
    sp = ParallelConfig(ring=2, ulysses=2)
    assert sp.ulysses_group(3) == [2, 3]
    assert sp.ring_group(3) == [1, 3]
    assert sp.sp_group(1) == [0, 1, 2, 3]
    assert sp.tp_group(2) == [2] and sp.pp_group(2) == [2] and sp.dp_group(2) == [2] and sp.cfg_group(2) == [2]
    cfg_tp = ParallelConfig(cfg=2, tp=2)
    assert cfg_tp.cfg_group(1) == [1, 3]
    assert cfg_tp.tp_group(1) == [0, 1]
    dp_pp = ParallelConfig(dp=2, pp=2)
    assert dp_pp.pp_group(2) == [2, 3] and dp_pp.dp_group(2) == [0, 2]
    assert repr(dp_pp) == "ParallelConfig(dp=2, cfg=1, ring=1, ulysses=1, pp=2, tp=1)"


def test_a_product_other_than_the_device_count_is_a_value_error():
    raises(ValueError, ParallelConfig(ring=2).device_mesh, "cpu",
           contains="dp * cfg * ring * ulysses * pp * tp = 1 * 1 * 2 * 1 * 1 * 1 = 2 devices, but there are 4")
    raises(ValueError, ParallelConfig(dp=2, tp=4).device_mesh, "cpu", contains="= 8 devices, but there are 4")
    raises(ValueError, ParallelConfig, ulysses=0, contains="ulysses must be >= 1, got 0")
    raises(TypeError, ParallelConfig, tp=2.0, contains="tp must be an int")
    raises(ValueError, ParallelConfig(ring=2, ulysses=2).ulysses_group, 4, contains="device 4 is not in")


def test_the_sequence_to_heads_reshuffle_on_the_ulysses_dimension_equals_torch():
    mesh = ParallelConfig(ring=2, ulysses=2).device_mesh("cpu")
    x = torch.arange(2 * 8 * 4 * 3, dtype=torch.float32).reshape(2, 8, 4, 3)
    # [B, S, H, D] with the sequence over ring then Ulysses; Ulysses' all-to-all moves its share to the heads.
    sequence = [Replicate(), Replicate(), Shard(1), Shard(1), Replicate(), Replicate()]
    heads = [Replicate(), Replicate(), Shard(1), Shard(2), Replicate(), Replicate()]
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=sequence)
    dh = dx.redistribute(mesh, heads)
    assert dh.placements == tuple(heads), dh.placements
    torch.testing.assert_close(dh.to_torch(), x)
    torch.testing.assert_close((dh * 2).sum(3).to_torch(), (x * 2).sum(3))


run(globals())
