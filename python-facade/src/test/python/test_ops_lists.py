"""Operators that take or return tensor lists run through the generic path (dtorch.aten): cat/concat, stack, hstack,
vstack, split (int and sizes), chunk, unbind and tensor_split, on 1-, 2- and 4-device meshes with several placements
(uneven sizes included), compared with the same operator in torch on one device (allclose, exact for integers)."""

import random

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run
from test_generic_ops import meshes, placements_for, wrap


def same(value, want, what):
    assert value.shape == want.shape and value.dtype == want.dtype, (what, value.shape, want.shape, value.dtype, want.dtype)
    ok = torch.allclose(value, want, atol=1e-6) if value.dtype.is_floating_point else torch.equal(value, want)
    assert ok, what


def same_list(values, wants, what):
    assert isinstance(values, list) and len(values) == len(wants), (what, type(values), len(values), len(wants))
    for v, w in zip(values, wants):
        same(v.to_torch(), w, what)


def inputs(shape, rng, integer):
    return torch.randint(-9, 9, shape) if integer else torch.rand(*shape)


def cases(seed, integer_parity):
    """Per mesh of meshes(): (mesh, integers or floats, a random 2-D or 3-D shape, a dimension of it, the random source)."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    for index, mesh in enumerate(meshes()):
        n = rng.choice((2, 3))
        shape = [rng.randrange(3, 10) for _ in range(n)]
        yield mesh, index % 2 == integer_parity, shape, rng.randrange(n), rng


def test_joins_match_torch():
    for mesh, integer, base, d, rng in cases(7, 1):
        n = len(base)
        xs = []
        for _ in range(rng.choice((2, 3))):
            shape = list(base)
            shape[d] = rng.randrange(1, 7)
            xs.append(inputs(shape, rng, integer))
        ds = [wrap(x, mesh, placements_for(mesh, x.shape, rng, partial=not integer)) for x in xs]
        what = (mesh, d, [dx.placements for dx in ds], [tuple(x.shape) for x in xs])
        same(dtorch.cat(ds, dim=d).to_torch(), torch.cat(xs, dim=d), ("cat",) + what)
        same(dtorch.cat(ds, d - n).to_torch(), torch.cat(xs, d - n), ("cat, negative dim",) + what)
        same(dtorch.concat(ds, dim=d).to_torch(), torch.concat(xs, dim=d), ("concat",) + what)
        ys = [inputs(base, rng, integer) for _ in range(3)]
        dys = [wrap(y, mesh, placements_for(mesh, y.shape, rng, partial=not integer)) for y in ys]
        what = (mesh, [dy.placements for dy in dys], base)
        k = rng.randrange(n + 1)
        same(dtorch.stack(dys, k).to_torch(), torch.stack(ys, k), ("stack", k) + what)
        same(dtorch.hstack(dys).to_torch(), torch.hstack(ys), ("hstack",) + what)
        same(dtorch.vstack(dys).to_torch(), torch.vstack(ys), ("vstack",) + what)
        vs = [inputs(base[-1:], rng, integer) for _ in range(2)]
        dvs = [wrap(v, mesh, placements_for(mesh, v.shape, rng)) for v in vs]
        same(dtorch.vstack(dvs).to_torch(), torch.vstack(vs), ("vstack of vectors", [v.placements for v in dvs]))
        same(dtorch.hstack(tuple(dvs)).to_torch(), torch.hstack(vs), ("hstack of vectors", [v.placements for v in dvs]))


def test_cuts_match_torch_and_return_lists():
    for mesh, integer, shape, d, rng in cases(11, 0):
        x = inputs(shape, rng, integer)
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng, partial=not integer))
        what = (mesh, dx.placements, shape, d)
        size = rng.randrange(1, 4)
        sizes = [1, shape[d] - 1]
        same_list(dx.split(size, d), x.split(size, d), ("split int",) + what)
        same_list(dtorch.split(dx, sizes, dim=d), torch.split(x, sizes, dim=d), ("split sizes",) + what)
        same_list(dx.chunk(3, d), x.chunk(3, d), ("chunk",) + what)
        same_list(dtorch.unbind(dx, dim=d), torch.unbind(x, dim=d), ("unbind",) + what)
        same_list(dx.tensor_split(3, d), x.tensor_split(3, d), ("tensor_split sections",) + what)
        same_list(dx.tensor_split([1, 2], dim=d), x.tensor_split([1, 2], dim=d), ("tensor_split indices",) + what)


def test_shards_off_the_joined_or_cut_dimension_stay_and_partial_sums_pass_through():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x, y = torch.rand(9, 5), torch.rand(9, 2)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)])
    dy = dtorch.Tensor(y, device_mesh=mesh, placements=[Shard(0)])
    assert dtorch.cat([dx, dy], dim=1).placements == (Shard(0),)
    assert dtorch.cat([dx, dx], dim=0).placements == (Replicate(),)
    assert dtorch.stack([dx, dx]).placements == (Shard(1),)
    assert [t.placements for t in dx.split(2, 1)] == [(Shard(0),)] * 3
    assert [t.placements for t in dx.chunk(2, 0)] == [(Replicate(),)] * 2
    assert [t.placements for t in dx.unbind(1)] == [(Shard(0),)] * 5
    px, py = dx.redistribute(mesh, [Partial()]), dy.redistribute(mesh, [Partial()])
    assert dtorch.cat([px, py], 1).placements == (Partial(),)
    assert [t.placements for t in px.split(3)] == [(Partial(),)] * 3
    same(dtorch.cat([px, py], 1).to_torch(), torch.cat([x, y], 1), "cat of partial sums")


def test_one_element_lists_stay_lists_and_bad_lists_raise_python_errors():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.rand(4, 3)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(1)])
    parts = dx.split(4)
    assert isinstance(parts, list) and len(parts) == 1
    same(parts[0].to_torch(), x, "one part")
    raises(TypeError, lambda: dtorch.cat([dx, x]))
    raises(TypeError, lambda: dtorch.cat([dx, dx], 0.0))
    raises(IndexError, lambda: dtorch.cat([dx, dx], 2))
    raises(ValueError, lambda: dtorch.cat([]))
    raises(ValueError, lambda: dtorch.cat([dx, dtorch.Tensor(torch.rand(4, 2), device_mesh=mesh, placements=[Shard(0)])], 0))


if __name__ == "__main__":
    run(globals())
