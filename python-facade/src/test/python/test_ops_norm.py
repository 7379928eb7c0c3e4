"""Normalization, softmax, embedding and dropout on distributed tensors (the generic path with their own strategies):
inputs made with torch, wrapped on 1-, 2-, 4- and 2x2-device meshes with several placements (uneven sizes included),
run through dtorch.nn.functional and compared with the same function of torch.nn.functional on one device."""

import random

import dtorch
import torch
import torch.nn.functional as F
import dtorch.nn.functional as DF
from dtorch import Shard, Replicate, Partial
from _testing import raises, run
from test_generic_ops import meshes, placements_for, wrap


def close(got, want, what):
    value = got.to_torch()
    assert value.shape == want.shape and value.dtype == want.dtype, (what, value.shape, want.shape, value.dtype, want.dtype)
    if value.dtype.is_floating_point:
        assert torch.allclose(value, want, rtol=1e-4, atol=1e-5), what
    else:
        assert torch.equal(value, want), what


def test_softmax_and_log_softmax_match_torch():
    rng = random.Random(7)
    torch.manual_seed(7)
    for mesh in meshes():
        x = torch.randn(5, 9, 6)
        for _ in range(2):
            dim = rng.randrange(-3, 3)
            dx = wrap(x, mesh, placements_for(mesh, x.shape, rng, partial=True))
            close(DF.softmax(dx, dim), F.softmax(x, dim), ("softmax", mesh, dx.placements, dim))
            close(DF.log_softmax(dx, dim=dim), F.log_softmax(x, dim=dim), ("log_softmax", mesh, dx.placements, dim))
            close(dx.softmax(dim), x.softmax(dim), ("Tensor.softmax", mesh, dx.placements, dim))
            close(DF.softmax(dx, dim, dtype=torch.float64), F.softmax(x, dim, dtype=torch.float64), ("softmax dtype", dim))


def test_layer_group_and_rms_norm_match_torch():
    rng = random.Random(11)
    torch.manual_seed(11)
    for mesh in meshes():
        x = torch.randn(6, 8, 5)
        w, b = torch.randn(8, 5), torch.randn(8, 5)
        g, h = torch.randn(8), torch.randn(8)
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng, partial=True))
        dw = wrap(w, mesh, placements_for(mesh, w.shape, rng))
        db = wrap(b, mesh, placements_for(mesh, b.shape, rng))
        dg = wrap(g, mesh, placements_for(mesh, g.shape, rng))
        dh = wrap(h, mesh, placements_for(mesh, h.shape, rng))
        what = (mesh, dx.placements)
        close(DF.layer_norm(dx, (8, 5), dw, db), F.layer_norm(x, (8, 5), w, b), ("layer_norm",) + what)
        close(DF.layer_norm(dx, [5], eps=1e-3), F.layer_norm(x, [5], eps=1e-3), ("layer_norm 1-D",) + what)
        close(DF.group_norm(dx, 4, dg, dh), F.group_norm(x, 4, g, h), ("group_norm",) + what)
        close(DF.rms_norm(dx, (5,)), F.rms_norm(x, (5,)), ("rms_norm",) + what)
        close(DF.rms_norm(dx, [8, 5], dw, eps=1e-6), F.rms_norm(x, [8, 5], w, eps=1e-6), ("rms_norm weight",) + what)


def test_batch_norm_in_evaluation_and_with_batch_statistics_matches_torch():
    rng = random.Random(13)
    torch.manual_seed(13)
    for mesh in meshes():
        x = torch.randn(9, 6, 5)
        mean, var, w, b = torch.randn(6), torch.rand(6) + 0.5, torch.randn(6), torch.randn(6)
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng))
        dmean, dvar, dw, db = (wrap(t, mesh, placements_for(mesh, t.shape, rng)) for t in (mean, var, w, b))
        what = (mesh, dx.placements, dmean.placements)
        close(DF.batch_norm(dx, dmean, dvar, dw, db), F.batch_norm(x, mean, var, w, b), ("eval",) + what)
        close(DF.batch_norm(dx, dmean, dvar, eps=1e-3), F.batch_norm(x, mean, var, eps=1e-3), ("eval no affine",) + what)
        close(DF.batch_norm(dx, None, None, dw, db, training=True), F.batch_norm(x, None, None, w, b, training=True),
              ("batch statistics",) + what)
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = dtorch.Tensor(torch.randn(4, 3), device_mesh=mesh, placements=[Shard(1)])
    dm = dtorch.Tensor(torch.zeros(3), device_mesh=mesh, placements=[Replicate()])
    assert DF.batch_norm(dx, dm, dm + 1.0).placements == (Shard(1),)
    raises(NotImplementedError, lambda: DF.batch_norm(dx, dm, dm + 1.0, training=True))


def test_embedding_matches_torch_exactly():
    rng = random.Random(17)
    torch.manual_seed(17)
    for mesh in meshes():
        weight = torch.randn(11, 8)
        indices = torch.randint(0, 11, (9, 4))
        for _ in range(2):
            dw = wrap(weight, mesh, placements_for(mesh, weight.shape, rng, partial=True))
            di = wrap(indices, mesh, placements_for(mesh, indices.shape, rng))
            got = DF.embedding(di, dw).to_torch()
            assert torch.equal(got, F.embedding(indices, weight)) or torch.allclose(got, F.embedding(indices, weight)), \
                (mesh, dw.placements, di.placements)
            close(DF.embedding(di, dw, padding_idx=-1), F.embedding(indices, weight, padding_idx=-1), (mesh, dw.placements))
    mesh = dtorch.init_device_mesh("cpu", (4,))
    dw = dtorch.Tensor(torch.randn(11, 8), device_mesh=mesh, placements=[Shard(1)])
    di = dtorch.Tensor(torch.randint(0, 11, (9, 4)), device_mesh=mesh, placements=[Shard(0)])
    assert DF.embedding(di, dw).placements == (Shard(2),)
    assert DF.embedding(di, dw.redistribute(mesh, [Replicate()])).placements == (Shard(0),)
    rows = dw.redistribute(mesh, [Shard(0)])
    di = di.redistribute(mesh, [Replicate()])
    assert DF.embedding(di, rows).placements == (Partial(),)
    assert torch.equal(DF.embedding(di, rows).to_torch(), F.embedding(di.to_torch(), rows.to_torch()))


def test_dropout_is_the_identity_in_evaluation_and_seeded_in_training():
    rng = random.Random(19)
    torch.manual_seed(19)
    x = torch.randn(10, 7)
    want = None
    for mesh in meshes():
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng, partial=True))
        assert torch.equal(DF.dropout(dx, 0.4, training=False).to_torch(), F.dropout(x, 0.4, training=False)) or \
            torch.allclose(DF.dropout(dx, 0.4, training=False).to_torch(), x)
        dtorch.manual_seed(5)
        out = DF.dropout(dx, p=0.4).to_torch()
        kept = out != 0
        assert torch.allclose(out, x * (kept.to(x.dtype) / 0.6), rtol=1e-5, atol=1e-6), (mesh, dx.placements)
        assert 0 < int(kept.sum().item()) < x.numel()
        if want is None:
            want = out
        assert torch.allclose(out, want, rtol=1e-5, atol=1e-6), ("the same seed gives the same mask on any mesh", mesh, dx.placements)
        close(DF.dropout(dx, 1.0), F.dropout(x, 1.0), ("p=1",))
        close(DF.dropout(dx, 0.0), F.dropout(x, 0.0), ("p=0",))
    raises(ValueError, lambda: DF.dropout(dx, 1.5))


def test_bad_calls_raise_python_errors():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = dtorch.Tensor(torch.randn(4, 6), device_mesh=mesh, placements=[Shard(0)])
    raises(TypeError, lambda: DF.softmax(dx))
    raises(IndexError, lambda: DF.softmax(dx, 2))
    raises(ValueError, lambda: DF.layer_norm(dx, [5]))
    raises(ValueError, lambda: DF.group_norm(dx.reshape(4, 6, 1), 4))
    raises(NotImplementedError, lambda: dtorch.aten("dropout", (dx, 0.5, True)))


if __name__ == "__main__":
    run(globals())
