"""Convolutions, pooling, interpolate and scaled_dot_product_attention on distributed tensors (the generic path with the
convolution, pooling, interpolate and attention strategies), on 1-, 2-, 4- and 2x2-device meshes with several placements
(uneven sizes and partial sums included), compared with the same function of torch.nn.functional on one device."""

import random

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Shard, Replicate, Partial
from _testing import raises, run
from test_generic_ops import meshes, placements_for, wrap

DF = dtorch.nn.functional


def check(out, want, what, exact=False):
    outs = out if isinstance(out, tuple) else (out,)
    wants = want if isinstance(want, tuple) else (want,)
    assert len(outs) == len(wants), what
    for o, w in zip(outs, wants):
        value = o.to_torch()
        assert value.shape == w.shape and value.dtype == w.dtype, (what, value.shape, w.shape, value.dtype, w.dtype)
        same = torch.equal(value, w) if exact or not w.dtype.is_floating_point else torch.allclose(value, w, rtol=1e-4, atol=1e-5)
        assert same, (what, o.placements)


def test_convolutions_match_torch():
    rng = random.Random(11)
    torch.manual_seed(11)
    x = torch.randn(5, 6, 7, 6)
    w = torch.randn(9, 6, 3, 3)
    b = torch.randn(9)
    x1 = torch.randn(5, 6, 9)
    w1 = torch.randn(8, 3, 3)
    b1 = torch.randn(8)
    wg = torch.randn(8, 3, 2, 2)
    wt = torch.randn(6, 4, 3, 3)
    bt = torch.randn(4)
    # Each case runs with f = torch.nn.functional on whole tensors and f = dtorch.nn.functional on distributed ones.
    cases = [
        (lambda f, a, k, c: f.conv2d(a, k, c), (x, w, b)),
        (lambda f, a, k, c: f.conv2d(a, k, c, stride=2, padding=1, dilation=(1, 2)), (x, w, b)),
        (lambda f, a, k: f.conv2d(a, k, padding="same"), (x, w)),
        (lambda f, a, k: f.conv2d(a, k, None, 1, "valid"), (x, w)),
        (lambda f, a, k: f.conv2d(a, k, groups=2), (x, wg)),
        (lambda f, a, k, c: f.conv1d(a, k, c, padding=1, groups=2), (x1, w1, b1)),
        (lambda f, a, k: f.conv1d(a, k, stride=2, groups=2), (x1, w1)),
        (lambda f, a, k, c: f.conv_transpose2d(a, k, c, stride=2, padding=1, output_padding=1), (x, wt, bt)),
        (lambda f, a, k: f.conv_transpose2d(a, k, dilation=2), (x, wt)),
    ]
    for mesh in meshes():
        for case, inputs in cases:
            for _ in range(2):
                wrapped = [wrap(t, mesh, placements_for(mesh, t.shape, rng, partial=True)) for t in inputs]
                check(case(DF, *wrapped), case(F, *inputs), [t.placements for t in wrapped])


def test_convolution_placements_follow_batch_and_channel_shards():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.randn(5, 6, 6, 6)
    w = torch.randn(7, 6, 3, 3)
    b = torch.randn(7)

    def conv(xp, wp, bias):
        dx = dtorch.Tensor(x, device_mesh=mesh, placements=[xp])
        dw = dtorch.Tensor(w, device_mesh=mesh, placements=[wp])
        db = dtorch.Tensor(b, device_mesh=mesh, placements=[Replicate()]) if bias else None
        out = DF.conv2d(dx, dw, db, padding=1)
        check(out, F.conv2d(x, w, b if bias else None, padding=1), (xp, wp, bias))
        return out.placements

    assert conv(Shard(0), Replicate(), True) == (Shard(0),)
    assert conv(Replicate(), Shard(0), True) == (Shard(1),)
    assert conv(Shard(1), Shard(1), False) == (Partial(),)
    assert conv(Shard(1), Replicate(), True) == (Replicate(),)
    assert conv(Shard(3), Replicate(), False) == (Replicate(),)


def test_pooling_matches_torch_and_indices_exactly():
    rng = random.Random(12)
    torch.manual_seed(12)
    x = torch.randn(5, 6, 9, 7)
    x1 = torch.randn(3, 6, 11)
    # Each case runs with (torch.nn.functional, torch) on whole tensors and (dtorch.nn.functional, dtorch) on distributed ones.
    cases = [
        (lambda f, m, a: f.max_pool2d(a, 2), x),
        (lambda f, m, a: f.max_pool2d(a, 3, 2, 1, ceil_mode=True), x),
        (lambda f, m, a: f.max_pool2d(a, (2, 3), (1, 2), 1, return_indices=True), x),
        (lambda f, m, a: f.avg_pool2d(a, 3, padding=1, count_include_pad=False), x),
        (lambda f, m, a: f.avg_pool2d(a, 2, ceil_mode=True, divisor_override=3), x),
        (lambda f, m, a: f.adaptive_avg_pool2d(a, (3, None)), x),
        (lambda f, m, a: f.adaptive_avg_pool2d(a, 4), x),
        (lambda f, m, a: f.adaptive_max_pool2d(a, [2, None]), x),
        (lambda f, m, a: f.adaptive_max_pool2d(a, 3, return_indices=True), x),
        (lambda f, m, a: m.adaptive_max_pool2d(a, [2, 3]), x),
        (lambda f, m, a: f.max_pool1d(a, 3, 2), x1),
        (lambda f, m, a: f.avg_pool1d(a, 2), x1),
        (lambda f, m, a: f.adaptive_avg_pool1d(a, 4), x1),
    ]
    for mesh in meshes():
        for case, t in cases:
            dt = wrap(t, mesh, placements_for(mesh, t.shape, rng, partial=True))
            check(case(DF, dtorch, dt), case(F, torch, t), dt.placements)


def test_pooling_keeps_batch_and_channel_shards_and_linear_partial_sums():
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    x = torch.randn(4, 6, 8, 8)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0), Shard(1)])
    assert DF.max_pool2d(dx, 2).placements == (Shard(0), Shard(1))
    rows = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(2), Shard(1)])
    assert DF.max_pool2d(rows, 2).placements == (Replicate(), Shard(1))
    p = wrap(x, mesh, [Partial(), Shard(0)])
    assert DF.avg_pool2d(p, 2).placements == (Partial(), Shard(0))
    assert DF.interpolate(p, scale_factor=2.0).placements == (Partial(), Shard(0))
    assert DF.max_pool2d(p, 2).placements == (Replicate(), Shard(0))
    check(DF.avg_pool2d(p, 2), F.avg_pool2d(x, 2), "partial")


def test_interpolate_matches_torch_for_every_mode():
    rng = random.Random(13)
    torch.manual_seed(13)
    x = torch.randn(5, 3, 6, 7)
    x1 = torch.randn(5, 3, 6)
    calls = [
        (dict(size=(9, 11)), x),
        (dict(scale_factor=1.5), x),
        (dict(scale_factor=(0.5, 2.0), mode="nearest-exact"), x),
        (dict(size=10, mode="bilinear", align_corners=True), x),
        (dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), x),
        (dict(size=(4, 5), mode="bilinear", antialias=True), x),
        (dict(scale_factor=2.0, mode="bicubic"), x),
        (dict(size=(3, 4), mode="area"), x),
        (dict(scale_factor=2.5, mode="linear"), x1),
        (dict(size=4, mode="nearest"), x1),
    ]
    for mesh in meshes():
        for kwargs, t in calls:
            dt = wrap(t, mesh, placements_for(mesh, t.shape, rng, partial=True))
            check(DF.interpolate(dt, **kwargs), F.interpolate(t, **kwargs), (kwargs, dt.placements))


def test_attention_matches_torch_sharded_on_batch_or_heads():
    rng = random.Random(14)
    torch.manual_seed(14)
    for mesh in meshes():
        q = torch.randn(5, 4, 6, 8)
        k = torch.randn(5, 4, 7, 8)
        v = torch.randn(5, 4, 7, 3)
        mask = torch.rand(6, 7) > 0.3
        heads_mask = torch.randn(5, 4, 6, 7)
        for _ in range(3):
            # q, k and v alike on batch or heads (each mesh dimension), or at random.
            places = [Shard(rng.randrange(2)) if rng.random() < 0.7 else Replicate() for m in range(mesh.ndim)]
            dq, dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=places) for t in (q, k, v))
            check(DF.scaled_dot_product_attention(dq, dk, dv), F.scaled_dot_product_attention(q, k, v), places)
            out = DF.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
            check(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), places)
            assert out.placements == tuple(places), (out.placements, places)
            dm = wrap(mask, mesh, placements_for(mesh, mask.shape, rng))
            check(DF.scaled_dot_product_attention(dq, dk, dv, attn_mask=dm), F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                  (places, dm.placements))
            dh = wrap(heads_mask, mesh, placements_for(mesh, heads_mask.shape, rng, partial=True))
            dr = wrap(q, mesh, placements_for(mesh, q.shape, rng, partial=True))
            check(DF.scaled_dot_product_attention(dr, dk, dv, dh, scale=0.3),
                  F.scaled_dot_product_attention(q, k, v, heads_mask, scale=0.3), (dr.placements, dh.placements))


def test_bad_calls_raise_python_errors():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = dtorch.Tensor(torch.randn(4, 3, 6, 6), device_mesh=mesh, placements=[Shard(0)])
    dw = dtorch.Tensor(torch.randn(5, 2, 3, 3), device_mesh=mesh, placements=[Replicate()])
    raises(ValueError, lambda: DF.conv2d(dx, dw), contains="channels")
    raises(ValueError, lambda: DF.interpolate(dx, size=3, scale_factor=2.0), contains="exactly one")
    raises(ValueError, lambda: DF.interpolate(dx, size=3, align_corners=True), contains="align_corners")
    raises(NotImplementedError, lambda: DF.interpolate(dx, size=3, mode="linear"))
    raises(NotImplementedError, lambda: DF.scaled_dot_product_attention(dx, dx, dx, dropout_p=0.5), contains="dropout_p")


if __name__ == "__main__":
    run(globals())
