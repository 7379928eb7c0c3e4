"""dtorch.channel(src_mesh, dst_mesh): redistributions between two disjoint meshes go through a WorkerTensorChannel while
the edge is declared, with exactly the values of the ordinary path; undeclared moves take the ordinary path."""

import dtorch
import torch
from dtorch import Replicate, Shard
from _testing import raises, run

SRC = dtorch.DeviceMesh("cpu", [0, 1])
DST = dtorch.DeviceMesh("cpu", [2, 3])


def test_values_equal_torch_through_the_channel_for_shard_and_replicate_targets():
    torch.manual_seed(3)
    value = torch.randn(5, 3)
    with dtorch.channel(SRC, DST) as edge:
        for source in ([Shard(0)], [Shard(1)], [Replicate()]):
            x = dtorch.Tensor(value, device_mesh=SRC, placements=source)
            for target in ([Shard(0)], [Shard(1)], [Replicate()]):
                y = x.redistribute(DST, target)
                assert y.placements == tuple(target), (source, target, y.placements)
                assert torch.equal(y.to_torch(), value), (source, target)
        assert edge.transfers == 9, edge.transfers
        assert "edge" in edge.name, edge.name


def test_twenty_transfers_in_a_row_keep_their_order():
    with dtorch.channel(SRC, DST) as edge:
        moved = [dtorch.arange(i, i + 4, device_mesh=SRC, placements=[Shard(0)]).redistribute(DST, [Shard(0)])
                 for i in range(20)]
        for i, y in enumerate(moved):
            assert y.to_torch().tolist() == [i, i + 1, i + 2, i + 3], (i, y.to_torch().tolist())
        assert edge.transfers == 20


def test_undeclared_moves_take_the_ordinary_path():
    other = dtorch.DeviceMesh("cpu", [3, 2])
    with dtorch.channel(SRC, DST) as edge:
        x = dtorch.arange(6, device_mesh=SRC, placements=[Shard(0)])
        assert x.redistribute(other, [Shard(0)]).to_torch().tolist() == [0, 1, 2, 3, 4, 5]
        back = x.redistribute(DST, [Replicate()]).redistribute(SRC, [Replicate()])
        assert back.to_torch().tolist() == [0, 1, 2, 3, 4, 5]
        assert edge.transfers == 1, "only SRC -> DST is the declared edge"


def test_refusals_leave_the_runtime_usable():
    raises(ValueError, dtorch.channel, SRC, dtorch.DeviceMesh("cpu", [1, 2]), contains="disjoint")
    raises(TypeError, dtorch.channel, SRC, [2, 3], contains="DeviceMesh")
    raises(ValueError, dtorch.channel, SRC, DST, timeout=0, contains="timeout")
    edge = dtorch.channel(SRC, DST, timeout=30)
    raises(RuntimeError, dtorch.channel, SRC, DST, contains="declared already")
    edge.close()
    edge.close()
    with dtorch.channel(SRC, DST) as again:
        x = dtorch.arange(4, device_mesh=SRC, placements=[Replicate()])
        assert x.redistribute(DST, [Shard(0)]).to_torch().tolist() == [0, 1, 2, 3]
        assert again.transfers == 1


def test_an_edge_left_open_is_closed_by_the_runtime():
    dtorch.channel(SRC, DST)  # the runtime's shutdown detaches and removes it (ChannelEdgeTest checks the files)
    x = dtorch.arange(4, device_mesh=SRC, placements=[Shard(0)])
    assert x.redistribute(DST, [Replicate()]).to_torch().tolist() == [0, 1, 2, 3]


run(globals())
