"""Operators without a hand-written spec reach libtorch through the generic path (dtorch.aten): element-wise operators
and reductions over dims, on 1-, 2- and 4-device meshes with several placements (uneven sizes included), compared with
the same operator in torch on one device."""

import random

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run


def meshes():
    return [dtorch.init_device_mesh("cpu", (1,)), dtorch.init_device_mesh("cpu", (2,)),
            dtorch.init_device_mesh("cpu", (4,)), dtorch.init_device_mesh("cpu", (2, 2))]


def placements_for(mesh, shape, rng, partial=False):
    out = []
    for m in range(mesh.ndim):
        choice = rng.randrange(4 if partial else 3)
        d = rng.randrange(len(shape))
        if choice == 3:
            out.append(Partial())
        elif choice > 0 and shape[d] >= 2 * mesh.shape[m]:
            out.append(Shard(d))
        else:
            out.append(Replicate())
    return out


def wrap(t, mesh, placements):
    if any(isinstance(p, Partial) for p in placements):
        whole = [Replicate() if isinstance(p, Partial) else p for p in placements]
        return dtorch.Tensor(t, device_mesh=mesh, placements=whole).redistribute(mesh, placements)
    return dtorch.Tensor(t, device_mesh=mesh, placements=placements)


POINTWISE = [
    ("clamp", lambda x, y: (x.clamp(0.2, 0.7), (x, y)), lambda dx, dy: dx.clamp(0.2, 0.7)),
    ("where", None, None),
    ("masked_fill", None, None),
    ("maximum", lambda x, y: (torch.maximum(x, y), None), lambda dx, dy: dtorch.maximum(dx, dy)),
    ("hardtanh", lambda x, y: (torch.nn.functional.hardtanh(x), None), lambda dx, dy: dtorch.nn.functional.hardtanh(dx)),
    ("leaky_relu", lambda x, y: (torch.nn.functional.leaky_relu(x, 0.2), None),
     lambda dx, dy: dtorch.nn.functional.leaky_relu(dx, 0.2)),
    ("sqrt", lambda x, y: (x.sqrt(), None), lambda dx, dy: dx.sqrt()),
    ("pow", lambda x, y: (torch.pow(x, y), None), lambda dx, dy: dtorch.pow(dx, dy)),
    ("gt", lambda x, y: (x.gt(y), None), lambda dx, dy: dx.gt(dy)),
]


def test_pointwise_operators_with_broadcasting_match_torch():
    rng = random.Random(3)
    torch.manual_seed(3)
    for mesh in meshes():
        for name, expect, got in POINTWISE:
            x = torch.rand(6, 5) - 0.25
            y = torch.rand(5) + 0.5 if rng.random() < 0.5 else torch.rand(6, 1) + 0.5
            dx = wrap(x, mesh, placements_for(mesh, x.shape, rng))
            dy = wrap(y, mesh, placements_for(mesh, y.shape, rng))
            if name == "where":
                c = x > 0.2
                dc = wrap(c, mesh, placements_for(mesh, c.shape, rng))
                want, out = torch.where(c, x, y), dtorch.where(dc, dx, dy)
            elif name == "masked_fill":
                m = y > 0.9
                dm = wrap(m, mesh, placements_for(mesh, m.shape, rng))
                want, out = x.masked_fill(m, -1.0), dx.masked_fill(dm, -1.0)
            else:
                want, out = expect(x, y)[0], got(dx, dy)
            value = out.to_torch()
            assert value.shape == want.shape and value.dtype == want.dtype, (name, value.shape, want.shape)
            assert torch.allclose(value, want, atol=1e-6, equal_nan=True) if value.dtype.is_floating_point else torch.equal(value, want), \
                (name, mesh, dx.placements, dy.placements)


def test_linear_pointwise_keeps_partial_sums_and_others_reduce_them():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.rand(4, 3)
    p = wrap(x, mesh, [Partial()])
    assert (dtorch.neg(p)).placements == (Partial(),)
    assert not dtorch.sqrt(p).placements[0].is_partial(), "not linear: the partial sums are reduced first"
    assert torch.allclose(dtorch.sqrt(p).to_torch(), x.sqrt())


def test_reductions_over_dims_match_torch_exactly_for_integers():
    rng = random.Random(5)
    torch.manual_seed(5)
    for mesh in meshes():
        x = torch.rand(7, 6, 5)
        i = torch.randint(-50, 50, (7, 6, 5))
        for _ in range(2):
            dim = rng.randrange(3)
            keep = rng.random() < 0.5
            dx = wrap(x, mesh, placements_for(mesh, x.shape, rng))
            di = wrap(i, mesh, placements_for(mesh, i.shape, rng))
            checks = [
                (dx.amax(dim, keep), x.amax(dim, keep)),
                (dx.amin(dim=dim, keepdim=keep), x.amin(dim=dim, keepdim=keep)),
                (dtorch.mean(dx, [dim], keep), x.mean([dim], keep)),
                (dx.var(dim), x.var(dim)),
                (dx.std(dim, keepdim=keep), x.std(dim, keepdim=keep)),
                (dx.argmax(dim), x.argmax(dim)),
                (dx.prod(dim), x.prod(dim)),
                (dtorch.logsumexp(dx, dim), torch.logsumexp(x, dim)),
            ]
            exact = [
                (dtorch.sum(di, [dim], keep), i.sum([dim], keep)),
                (di.amax(dim), i.amax(dim)),
                (di.argmin(dim), i.argmin(dim)),
            ]
            for out, want in checks:
                value = out.to_torch()
                assert value.shape == want.shape and torch.allclose(value, want, rtol=1e-4, atol=1e-5), (dx.placements, dim)
            for out, want in exact:
                assert torch.equal(out.to_torch(), want), (di.placements, dim)
            values, indices = dtorch.max(dx, dim)
            assert torch.allclose(values.to_torch(), x.max(dim).values) and torch.equal(indices.to_torch(), x.max(dim).indices)
            assert dtorch.max(dx, dim).indices.dtype == torch.int64


def test_a_sharded_sum_is_a_partial_sum_and_a_sharded_mean_is_gathered():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = torch.rand(10, 3)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)])
    assert dtorch.sum(dx, [0]).placements == (Partial(),)
    assert dx.amax(0).placements == (Partial("max"),)
    assert dx.amax(1).placements == (Shard(0),)
    assert dtorch.mean(dx, [0]).placements == (Replicate(),)
    assert torch.allclose(dtorch.mean(dx, [0]).to_torch(), x.mean(0))


def test_memory_formats_are_taken_by_name_as_torch_takes_them():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.rand(4, 3)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)])
    copy = dtorch.clone(dx, memory_format=torch.contiguous_format)
    assert copy.placements == (Shard(0),) and torch.equal(copy.to_torch(), x)
    assert torch.equal(dx.clone(memory_format=torch.preserve_format).to_torch(), x)


def test_bad_calls_raise_python_errors():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = dtorch.Tensor(torch.rand(4, 3), device_mesh=mesh, placements=[Shard(0)])
    raises(AttributeError, lambda: dtorch.no_such_operator(dx))
    raises(AttributeError, lambda: dx.no_such_method())
    raises(TypeError, lambda: dtorch.clamp(dx, "x"))
    raises(TypeError, lambda: dtorch.maximum(dx, torch.rand(4, 3)))
    assert dx.relu_() is dx and dx.placements == (Shard(0),), "in place, keeping its placements"


if __name__ == "__main__":
    run(globals())
