"""DTensor semantics on CUDA meshes: operands of different placements moved implicitly, empty shards, comparisons and
masks, in-place writes and views, the local-shard API; compared with torch on the host."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dtorch  # noqa: E402
import torch  # noqa: E402
from dtorch import Shard, Replicate, Partial  # noqa: E402
from _testing import run  # noqa: E402


def mesh():
    return dtorch.init_device_mesh(dtorch.device_type(), (4,))


def place(t, m, placements):
    whole = [Replicate() if p.is_partial() else p for p in placements]
    d = dtorch.distribute_tensor(t, m, whole)
    return d if whole == list(placements) else d.redistribute(m, placements)


def same(got, want, what):
    assert got.shape == want.shape and torch.allclose(got.float(), want.float(), atol=1e-5), "%s: %s vs %s" % (
        what, got.tolist(), want.tolist())


def test_operands_of_any_placements():
    m = mesh()
    a = torch.arange(30, dtype=torch.float32).reshape(6, 5) - 12
    b = torch.arange(30, dtype=torch.float32).reshape(6, 5).flip(0) / 3
    for pa in ([Replicate()], [Shard(0)], [Shard(1)], [Partial()]):
        for pb in ([Replicate()], [Shard(0)], [Shard(1)], [Partial()]):
            x, y = place(a, m, pa), place(b, m, pb)
            same((x + y).to_torch(), a + b, (pa, pb))
            same(dtorch.where(x > y, x, y).to_torch(), torch.maximum(a, b), (pa, pb, "where"))
        same(place(a, m, pa).relu().to_torch(), a.relu(), (pa, "relu"))


def test_empty_shards():
    m = mesh()
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    d = dtorch.distribute_tensor(x, m, [Shard(0)])          # 1, 1, 0, 0 rows
    same(d.to_torch(), x, "two rows over four devices")
    same(d.sum(0).to_torch(), x.sum(0), "sum over the rows")
    same(d.amax(0).to_torch(), x.amax(0), "max over the rows")
    same(d.redistribute(m, [Shard(1)]).to_torch(), x, "to columns")


def test_in_place_writes_and_views():
    m = mesh()
    want = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    x = place(want.clone(), m, [Shard(0)])
    x[3] = -1.0
    want[3] = -1.0
    x += 1
    want += 1
    t = x.T
    t[0, 5] = 9.0
    want[5, 0] = 9.0
    rows = x[2:5]
    rows.mul_(2)
    want[2:5] *= 2
    same(x.to_torch(), want, "writes")
    masked = x.masked_fill(x > 20, 0.0)
    same(masked.to_torch(), want.masked_fill(want > 20, 0.0), "masked_fill")


def test_local_shards():
    m = mesh()
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    d = dtorch.distribute_tensor(x, m, [Shard(0)])
    locals_ = d.to_local()
    assert len(locals_) == 4 and all(t.shape == (1, 3) for t in locals_)
    back = dtorch.Tensor.from_local(locals_, m, [Shard(0)])  # the devices' own tensors, given back
    same(back.full_tensor(), x, "from_local(to_local())")


run(globals())
