"""Distributed tensors as a PyTorch DTensor user writes them: operands of different placements (implicit
redistribution, and the strict mode that refuses it), in-place operators and augmented assignments, t[box] = v, views
that write into their base, out=, and to_torch() as a snapshot; all compared with torch on one device."""

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run


def line():
    return dtorch.init_device_mesh("cpu", (4,))


def grid():
    return dtorch.init_device_mesh("cpu", (2, 2))


def place(t, mesh, placements):
    """t distributed on mesh with placements, Partial ones made from a replicated copy."""
    whole = [Replicate() if p.is_partial() else p for p in placements]
    d = dtorch.distribute_tensor(t, mesh, whole)
    return d if whole == list(placements) else d.redistribute(mesh, placements)


def same(got, want, what):
    assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5), "%s: %s vs %s" % (what, got.tolist(), want.tolist())


PLACEMENTS = [[Replicate()], [Shard(0)], [Shard(1)], [Partial()]]


def test_binary_operators_take_operands_of_any_placements():
    mesh = line()
    a = torch.arange(30, dtype=torch.float32).reshape(6, 5) - 12
    b = torch.arange(30, dtype=torch.float32).reshape(6, 5).flip(0) / 3
    for pa in PLACEMENTS:
        for pb in PLACEMENTS:
            x, y = place(a, mesh, pa), place(b, mesh, pb)
            same((x + y).to_torch(), a + b, (pa, pb, "+"))
            same((x * y).to_torch(), a * b, (pa, pb, "*"))
            same(dtorch.maximum(x, y).to_torch(), torch.maximum(a, b), (pa, pb, "maximum"))
        x = place(a, mesh, pa)
        same(x.relu().to_torch(), a.relu(), (pa, "relu"))
        same((x + 1).to_torch(), a + 1, (pa, "+ 1"))
        same(x.sum(1).to_torch(), a.sum(1), (pa, "sum"))


def test_the_strict_mode_refuses_what_would_move_and_runs_what_fits():
    mesh = line()
    rows = dtorch.ones(8, 8, device_mesh=mesh, placements=[Shard(0)])
    cols = dtorch.ones(8, 8, device_mesh=mesh, placements=[Shard(1)])
    assert dtorch.implicit_redistribution()
    dtorch.set_implicit_redistribution(False)
    try:
        e = raises(dtorch.ShardingError, lambda: rows + cols, contains="[S(0)] and [S(1)]")
        assert "Legal:" in str(e)
        raises(dtorch.ShardingError, lambda: dtorch.maximum(rows, cols), contains="strict mode")
        same((rows + rows).to_torch(), torch.full((8, 8), 2.0), "inputs that fit")
    finally:
        dtorch.set_implicit_redistribution(True)
    same((rows + cols).to_torch(), torch.full((8, 8), 2.0), "implicit again")


def test_in_place_operators_keep_the_placements_and_write_every_shard():
    mesh = line()
    a = torch.arange(24, dtype=torch.float32).reshape(6, 4) - 7
    b = torch.arange(24, dtype=torch.float32).reshape(6, 4) % 5
    for pa in PLACEMENTS:
        for pb in PLACEMENTS:
            x = place(a, mesh, pa)
            y = place(b, mesh, pb)
            same_object = x
            x += y
            assert x is same_object
            x.mul_(2)
            x -= 1
            assert list(x.placements) == pa, (pa, x.placements)
            same(x.to_torch(), (a + b) * 2 - 1, (pa, pb))
    x = place(a, mesh, [Partial()])
    assert x.relu_() is x and list(x.placements) == [Partial()]
    same(x.to_torch(), a.relu(), "relu_ of a partial sum: computed out of place, copied back")
    raises(ValueError, lambda: dtorch.arange(8, device_mesh=mesh, placements=[Shard(0)]).add_(0.5))


def test_box_writes_match_torch_in_place():
    for mesh, placements in [(line(), [Shard(0)]), (line(), [Shard(1)]), (line(), [Replicate()]), (line(), [Partial()]),
                             (grid(), [Shard(0), Shard(0)]), (grid(), [Shard(1), Partial()])]:
        want = torch.arange(54, dtype=torch.float32).reshape(9, 6)
        x = place(want.clone(), mesh, placements)
        alias = x
        for index, value in [(2, 100.0), ((slice(1, 7, 2), slice(None)), -1.0), ((Ellipsis, 4), torch.arange(9.0)),
                             ((slice(3, 3),), 5.0), ((-1, slice(-2, None)), torch.tensor([7.0, 8.0])), ((None, 0, 0), 42.0)]:
            want[index] = value
            x[index] = value
        assert alias is x and list(x.placements) == placements
        same(x.to_torch(), want, (mesh, placements))


def test_views_write_into_their_base_and_follow_it():
    mesh = line()
    want = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    x = place(want.clone(), mesh, [Shard(0)])
    t = x.T                      # keeps every shard where it is: the same memory
    t[0, 3] = -1.0
    want[3, 0] = -1.0
    same(x.to_torch(), want, "a write into the transpose")
    rows = x[2:5]                # a slice across the row shards: memory of its own, kept equal to x
    rows[1] += 10
    want[3] += 10
    same(x.to_torch(), want, "written back into the base")
    x[4, :] = 0.0
    want[4, :] = 0.0
    same(rows.to_torch(), want[2:5], "computed again after the base changed")
    flat = x.reshape(48)
    flat.mul_(0.5)
    want *= 0.5
    same(x.to_torch(), want, "a reshape")


def test_to_torch_is_a_snapshot_and_out_writes_into_the_tensor_given():
    mesh = line()
    one = dtorch.tensor([1.0, 2.0, 3.0])           # on one device: to_torch() must not lend the device's tensor
    value = one.to_torch()
    one.add_(1)
    assert value.tolist() == [1.0, 2.0, 3.0] and one.to_torch().tolist() == [2.0, 3.0, 4.0]
    a = place(torch.ones(4, 4), mesh, [Shard(0)])
    out = dtorch.zeros(4, 4, device_mesh=mesh, placements=[Shard(1)])
    assert dtorch.add(a, a, out=out) is out
    assert list(out.placements) == [Shard(1)]
    same(out.to_torch(), torch.full((4, 4), 2.0), "out=")


def test_the_profiler_names_implicit_moves():
    mesh = line()
    rows = dtorch.ones(64, 16, device_mesh=mesh, placements=[Shard(0)])
    cols = dtorch.ones(64, 16, device_mesh=mesh, placements=[Shard(1)])
    dtorch.sync()
    with dtorch.profiler.profile() as prof:
        (rows + cols).to_torch()
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=30)
    assert "redistribute (implicit, for add)" in table, table


run(globals())
