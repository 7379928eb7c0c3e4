"""Matrix products on distributed tensors through the generic path (the matmul family's sharding strategy): mm, bmm,
matmul and @ (1-D operands and broadcast batch dimensions), linear with and without bias, dot, mv, outer, addmm,
baddbmm and einsum, on 1-, 2-, 4- and 2x2-device meshes with several placements (uneven sizes and partial sums included),
compared with the same operator in torch on one device."""

import random

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run
from test_generic_ops import meshes, placements_for, wrap

F = dtorch.nn.functional

# name, shapes of the inputs (m, k, n, b stand for random sizes), the torch call, the dtorch call
PRODUCTS = [
    ("mm", ("mk", "kn"), torch.mm, dtorch.mm),
    ("bmm", ("bmk", "bkn"), torch.bmm, lambda a, b: a.bmm(b)),
    ("@", ("mk", "kn"), lambda a, b: a @ b, lambda a, b: a @ b),
    ("matmul batched", ("bmk", "kn"), torch.matmul, dtorch.matmul),
    ("matmul broadcast", ("b1mk", "2kn"), torch.matmul, lambda a, b: a.matmul(b)),
    ("matmul vector", ("k", "bkn"), torch.matmul, dtorch.matmul),
    ("matmul matrix-vector", ("bmk", "k"), torch.matmul, lambda a, b: a @ b),
    ("linear", ("bmk", "nk"), torch.nn.functional.linear, F.linear),
    ("linear bias", ("mk", "nk", "n"), torch.nn.functional.linear, dtorch.linear),
    ("dot", ("k", "k"), torch.dot, dtorch.dot),
    ("mv", ("mk", "k"), torch.mv, lambda a, b: a.mv(b)),
    ("outer", ("m", "n"), torch.outer, dtorch.outer),
    ("addmm", ("n", "mk", "kn"), lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2.0),
     lambda s, a, b: dtorch.addmm(s, a, b, beta=0.5, alpha=2.0)),
    ("baddbmm", ("bmn", "bmk", "bkn"), torch.baddbmm, dtorch.baddbmm),
    ("einsum", ("mk", "kn"), lambda a, b: torch.einsum("ij,jk->ik", [a, b]), lambda a, b: dtorch.einsum("ij,jk->ik", a, b)),
    ("einsum batched", ("bmk", "bkn"), lambda a, b: torch.einsum("bij,bjk->bik", [a, b]),
     lambda a, b: dtorch.einsum("bij,bjk->bik", [a, b])),
    ("einsum ellipsis", ("bmk", "k"), lambda a, b: torch.einsum("...j,j", [a, b]), lambda a, b: dtorch.einsum("...j,j", a, b)),
    ("torch.einsum, operands as arguments", ("bmk", "bkn"), lambda a, b: torch.einsum("bij,bjk->bik", a, b),
     lambda a, b: torch.einsum("bij,bjk->bik", a, b)),
]


def shapes_for(letters, rng):
    sizes = {c: rng.randrange(3, 9) for c in "mknb"}
    return [tuple(sizes[c] if c in sizes else int(c) for c in s) for s in letters]


def test_products_match_torch_on_every_mesh_and_placement():
    rng = random.Random(7)
    torch.manual_seed(7)
    for mesh in meshes():
        for name, letters, want_fn, got_fn in PRODUCTS:
            xs = [torch.rand(*s) for s in shapes_for(letters, rng)]
            ds = [wrap(x, mesh, placements_for(mesh, x.shape, rng, partial=True)) for x in xs]
            want, out = want_fn(*xs), got_fn(*ds)
            value = out.to_torch()
            assert value.shape == want.shape and value.dtype == want.dtype, (name, value.shape, want.shape)
            assert torch.allclose(value, want, rtol=1e-4, atol=1e-5), (name, mesh, [d.placements for d in ds], out.placements)


def test_integer_products_are_exact():
    rng = random.Random(9)
    for mesh in meshes():
        a = torch.randint(-20, 20, (rng.randrange(3, 9), 6))
        b = torch.randint(-20, 20, (6, rng.randrange(3, 9)))
        da = wrap(a, mesh, placements_for(mesh, a.shape, rng, partial=True))
        db = wrap(b, mesh, placements_for(mesh, b.shape, rng, partial=True))
        assert torch.equal((da @ db).to_torch(), a @ b), (mesh, da.placements, db.placements)


def test_tensor_parallel_layouts_stay_as_they_are():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x, w1, b1, w2, b2 = torch.rand(5, 8), torch.rand(6, 8), torch.rand(6), torch.rand(3, 6), torch.rand(3)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Replicate()])
    column = F.linear(dx, dtorch.Tensor(w1, device_mesh=mesh, placements=[Shard(0)]),
                      dtorch.Tensor(b1, device_mesh=mesh, placements=[Shard(0)]))
    assert column.placements == (Shard(1),)
    row = F.linear(column, dtorch.Tensor(w2, device_mesh=mesh, placements=[Shard(1)]),
                   dtorch.Tensor(b2, device_mesh=mesh, placements=[Replicate()]))
    assert row.placements == (Partial(),)
    want = torch.nn.functional.linear(torch.nn.functional.linear(x, w1, b1), w2, b2)
    assert torch.allclose(row.to_torch(), want, rtol=1e-5), "the bias is added once"
    w = torch.rand(8, 6)
    rows = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)]) @ dtorch.Tensor(w, device_mesh=mesh, placements=[Replicate()])
    assert rows.placements == (Shard(0),)
    inner = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(1)]) @ dtorch.Tensor(w, device_mesh=mesh, placements=[Shard(0)])
    assert inner.placements == (Partial(),)
    assert torch.allclose(inner.to_torch(), x @ w, rtol=1e-5)
    summed = dtorch.einsum("ij,jk->ik", dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(1)]),
                           dtorch.Tensor(w, device_mesh=mesh, placements=[Shard(0)]))
    assert summed.placements == (Partial(),), "a label summed away gives a partial sum"


def test_misfit_shapes_raise_python_errors():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    a = dtorch.Tensor(torch.rand(4, 6), device_mesh=mesh, placements=[Shard(0)])
    b = dtorch.Tensor(torch.rand(5, 3), device_mesh=mesh, placements=[Replicate()])
    raises(ValueError, lambda: a @ b)
    raises(ValueError, lambda: dtorch.mm(a, b))
    raises(TypeError, lambda: dtorch.mm(a, torch.rand(6, 3)))


if __name__ == "__main__":
    run(globals())
