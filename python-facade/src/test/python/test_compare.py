"""Comparison, logical and bitwise operators on distributed tensors (>, <, >=, <=, ==, !=, &, |, ^, ~, reflected forms,
method forms and dtorch.<op>), where, masked_fill and boolean indexing, against single-device torch on 1-d and 2-d
meshes with sharded, replicated and partial inputs; bool results and torch's type promotion; __hash__ and __bool__."""

import operator

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run


def meshes():
    return [dtorch.init_device_mesh("cpu", (2,)), dtorch.init_device_mesh("cpu", (2, 2))]


def placements(mesh):
    """Sharded, replicated and partial layouts of a [6, 4] tensor on `mesh`."""
    if mesh.ndim == 1:
        return [[Shard(0)], [Shard(1)], [Replicate()], [Partial()]]
    return [[Shard(0), Shard(1)], [Replicate(), Shard(0)], [Partial(), Shard(1)], [Shard(1), Replicate()]]


def wrap(t, mesh, ps):
    """t on mesh with placements ps; a Partial placement is made from the replicated tensor."""
    if any(isinstance(p, Partial) for p in ps):
        whole = [Replicate() if isinstance(p, Partial) else p for p in ps]
        return dtorch.Tensor(t, device_mesh=mesh, placements=whole).redistribute(mesh, ps)
    return dtorch.Tensor(t, device_mesh=mesh, placements=ps)


def same(got, want, what):
    value = got.to_torch() if isinstance(got, dtorch.Tensor) else got
    assert tuple(value.shape) == tuple(want.shape), (what, value.shape, want.shape)
    assert value.dtype == want.dtype, (what, value.dtype, want.dtype)
    if want.dtype.is_floating_point:
        assert torch.allclose(value, want, atol=1e-6), (what, value, want)
    else:
        assert torch.equal(value, want), (what, value.tolist(), want.tolist())


COMPARISONS = [operator.gt, operator.lt, operator.ge, operator.le, operator.eq, operator.ne]


def test_comparisons_with_tensors_and_numbers_match_torch():
    torch.manual_seed(1)
    for mesh in meshes():
        for ps in placements(mesh):
            x = torch.randint(-2, 3, (6, 4)).float()  # small integers, so that == and != meet equal values
            y = torch.randint(-2, 3, (4,)).float()
            dx = wrap(x, mesh, ps)
            dy = wrap(y, mesh, [Replicate()] * mesh.ndim)
            for op in COMPARISONS:
                what = (op.__name__, mesh, ps)
                same(op(dx, dy), op(x, y), what)
                same(op(dx, 1), op(x, 1), what + ("int",))
                same(op(dx, 0.5), op(x, 0.5), what + ("float",))
                same(op(1, dx), op(1, x), what + ("reflected",))


def test_reflected_comparisons_swap_as_python_does():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = torch.arange(8)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)])
    same(3 < dx, x > 3, "3 < dx")
    same(3 >= dx, x <= 3, "3 >= dx")
    same(2 == dx, x == 2, "2 == dx")
    same(2 != dx, x != 2, "2 != dx")


def test_comparisons_keep_shards_and_give_bool():
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    dx = wrap(torch.randn(6, 4), mesh, [Shard(1), Shard(0)])
    out = dx > 0
    assert out.dtype == dtorch.bool
    assert out.placements == (Shard(1), Shard(0)), out.placements


def test_integers_compare_exactly_with_ints_and_in_floating_point_with_floats():
    big = 2 ** 62 + 1  # the nearest double is 2**62: only an exact comparison tells it from its neighbours
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = torch.tensor([big - 1, big, big + 1, 0, 1, 2, 3, -big])
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)])
    same(dx == big, x == big, "== big")
    assert (dx == big).to_torch().tolist().count(True) == 1
    same(dx > big, x > big, "> big")
    same(dx.ne(-big), x.ne(-big), "ne(-big)")
    same(dx > 1.5, x > 1.5, "int64 > 1.5")
    same(dx & big, x & big, "& big")
    i32 = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    di32 = dtorch.Tensor(i32, device_mesh=mesh, placements=[Shard(0)])
    same(di32 == 2.0, i32 == 2.0, "int32 == 2.0")
    same(di32 < 2.5, i32 < 2.5, "int32 < 2.5")


def test_logical_and_bitwise_operators_promote_as_torch():
    torch.manual_seed(2)
    for mesh in meshes():
        a = torch.rand(6, 4) > 0.5
        b = torch.rand(4) > 0.3
        i = torch.randint(0, 64, (6, 4))
        j = torch.randint(0, 64, (4,), dtype=torch.int32)
        for ps in placements(mesh):
            whole = [Replicate() if isinstance(p, Partial) else p for p in ps]  # bools and ints are not summed partially
            da, di = wrap(a, mesh, whole), wrap(i, mesh, whole)
            db, dj = wrap(b, mesh, [Replicate()] * mesh.ndim), wrap(j, mesh, [Replicate()] * mesh.ndim)
            what = (mesh, ps)
            same(da & db, a & b, what + ("bool & bool",))
            same(da | db, a | b, what + ("bool | bool",))
            same(da ^ db, a ^ b, what + ("bool ^ bool",))
            same(~da, ~a, what + ("~bool",))
            same(da & True, a & True, what + ("bool & True",))
            same(di & dj, i & j, what + ("int64 & int32",))
            same(di | 5, i | 5, what + ("int | 5",))
            same(5 ^ di, 5 ^ i, what + ("5 ^ int",))
            same(~di, ~i, what + ("~int",))
            same(di.bitwise_not(), i.bitwise_not(), what + ("bitwise_not()",))
            same(da.logical_and(di), a.logical_and(i), what + ("logical_and",))
            same(dtorch.logical_or(da, db), torch.logical_or(a, b), what + ("dtorch.logical_or",))
            same(da.logical_xor(db), a.logical_xor(b), what + ("logical_xor",))
            same(di.logical_not(), i.logical_not(), what + ("logical_not",))


def test_method_forms_and_module_functions():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x, y = torch.randn(6, 4), torch.randn(6, 4)
    dx = wrap(x, mesh, [Shard(0)])
    dy = wrap(y, mesh, [Partial()])
    same(dx.gt(0), x.gt(0), "gt(0)")
    same(dx.eq(dy), x.eq(y), "eq(dy)")
    same(dx.le(dy), x.le(y), "le(dy) of a partial tensor")
    same(dtorch.gt(dx, 0.25), torch.gt(x, 0.25), "dtorch.gt")
    same(dtorch.ne(dx, dy), torch.ne(x, y), "dtorch.ne")
    same(dx.lt(dy).logical_and(dx.ge(-1)), x.lt(y).logical_and(x.ge(-1)), "chained")


def test_invert_of_a_float_tensor_is_a_type_error():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = wrap(torch.randn(4), mesh, [Shard(0)])
    raises(TypeError, lambda: ~dx, contains="integral or bool")


def test_a_local_torch_tensor_is_refused_not_compared_to_false():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = wrap(torch.randn(4), mesh, [Shard(0)])
    raises(TypeError, lambda: dx == torch.zeros(4), contains="local torch.Tensor")
    assert (dx == "text") is False  # not a number nor a tensor: Python's identity fallback, as torch
    assert (dx != None) is True  # noqa: E711 - the operator itself is tested


def test_power_floor_division_remainder_and_abs_match_torch():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = torch.tensor([[-3.5, -2.0, 0.5], [1.0, 2.5, 4.0], [-1.0, 3.0, 6.0], [7.0, -8.5, 9.0], [0.25, 2.0, -4.0]])
    ints = torch.tensor([[-7, 5, 9], [4, -6, 11], [13, 2, -3], [8, 10, -12], [1, 3, 14]])
    for placements in ([Shard(0)], [Shard(1)], [Replicate()]):
        d = dtorch.distribute_tensor(x, mesh, placements)
        n = dtorch.distribute_tensor(ints, mesh, placements)
        for got, want, what in ((d ** 2, x ** 2, "t ** 2"), (d ** d, x ** x, "t ** t"), (2 ** d, 2 ** x, "2 ** t"),
                                (d // 2, x // 2, "t // 2"), (n // 3, ints // 3, "int t // 3"), (n % 5, ints % 5, "int t % 5"),
                                (d % 1.5, x % 1.5, "t % 1.5"), (17 % n, torch.remainder(torch.full_like(ints, 17), ints), "17 % int t"), (abs(d), abs(x), "abs(t)")):
            value = got.full_tensor()
            assert value.dtype == want.dtype, "%s %s: dtype %s vs %s" % (what, placements, value.dtype, want.dtype)
            assert torch.allclose(value.double(), want.double(), equal_nan=True), "%s %s: %s vs %s" % (what, placements, value, want)
        assert (+d) is d


def test_hash_is_identity_and_equality_is_element_wise():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = wrap(torch.ones(4), mesh, [Shard(0)])
    dy = wrap(torch.ones(4), mesh, [Shard(0)])
    assert hash(dx) == hash(dx) and hash(dx) != hash(dy)
    assert len({dx, dy}) == 2
    d = {dx: "x"}
    assert d[dx] == "x"
    assert isinstance(dx == dy, dtorch.Tensor)


def test_bool_of_one_element_reads_its_value():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = wrap(torch.tensor([1.0, -2.0, 3.0, 4.0]), mesh, [Shard(0)])
    assert bool(dx.sum() > 0) is True
    assert bool(dx.sum() > 100) is False
    assert bool(dx[1] < 0)
    if dx.max() > 3.5:
        pass
    else:
        raise AssertionError("if on a one-element comparison")
    assert (dx.sum() > 0).item() is True
    raises(RuntimeError, lambda: bool(dx > 0), contains="more than one value is ambiguous")
    raises(RuntimeError, lambda: bool(dx[0:0]), contains="no values is ambiguous")


def test_where_and_masked_fill_match_torch():
    torch.manual_seed(3)
    for mesh in meshes():
        for ps in placements(mesh):
            x = torch.randn(6, 4)
            y = torch.randn(4)
            xi = torch.randint(-5, 5, (6, 4))
            dx = wrap(x, mesh, ps)
            dy = wrap(y, mesh, [Replicate()] * mesh.ndim)
            dxi = wrap(xi, mesh, [Replicate() if isinstance(p, Partial) else p for p in ps])
            what = (mesh, ps)
            same(dtorch.where(dx > 0, dx, 0.1 * dx), torch.where(x > 0, x, 0.1 * x), what + ("leaky",))
            same(dtorch.where(dx > 0, dx, dy), torch.where(x > 0, x, y), what + ("tensors",))
            same(dtorch.where(dx > 0, dx, 0.5), torch.where(x > 0, x, 0.5), what + ("scalar other",))
            same(dtorch.where(dx > 0, 2.0, dy), torch.where(x > 0, 2.0, y), what + ("scalar self",))
            same(dtorch.where(dx > 0, 1, 0), torch.where(x > 0, 1, 0), what + ("int scalars",))
            same(dtorch.where(dx > 0, dxi, 0.5), torch.where(x > 0, xi, 0.5), what + ("int and float",))
            same(dx.masked_fill(dx < 0, 0.0), x.masked_fill(x < 0, 0.0), what + ("masked_fill",))
            same(dxi.masked_fill(dy > 0, 7), xi.masked_fill(y > 0, 7), what + ("int masked_fill, broadcast mask",))


def test_boolean_indexing_keeps_shards_of_dimensions_the_mask_does_not_cover():
    torch.manual_seed(4)
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.randn(6, 5)
    mask = x[:, 0] > 0
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(1)])
    for dmask in (dtorch.Tensor(mask, device_mesh=mesh, placements=[Replicate()]),
                  dtorch.Tensor(mask, device_mesh=mesh, placements=[Shard(0)]), mask):
        rows = dx[dmask]
        assert rows.placements == (Shard(1),), rows.placements
        same(rows, x[mask], "x[mask] of x [S(1)], mask %r" % (type(dmask).__name__,))
    partial = wrap(x, mesh, [Partial()])
    rows = partial[dx[:, 0] > 0]
    assert rows.placements == (Partial(),), rows.placements
    same(rows, x[mask], "x[mask] of a partial x")
    grid = dtorch.init_device_mesh("cpu", (2, 2))
    x3 = torch.randn(4, 3, 6)
    m2 = torch.rand(4, 3) > 0.4
    dx3 = dtorch.Tensor(x3, device_mesh=grid, placements=[Replicate(), Shard(2)])
    out = dx3[dtorch.Tensor(m2, device_mesh=grid, placements=[Shard(0), Replicate()])]
    assert out.placements == (Replicate(), Shard(1)), out.placements
    same(out, x3[m2], "x[mask2d] of x [R, S(2)]")


def test_boolean_indexing_over_a_sharded_dimension_replicates_it():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = torch.randn(8, 3)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)])
    out = dx[dx > 0]
    same(out, x[x > 0], "x[x > 0] of x [S(0)]")
    assert out.placements == (Replicate(),), out.placements
    same(dx[(dx[:, 1] > 0,)], x[x[:, 1] > 0], "x[(mask,)]")


def test_boolean_indexing_edge_cases():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.randn(4, 6)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(1)])
    none = dx[dx[:, 0] > 100]
    assert none.shape == (0, 6) and none.placements == (Shard(1),), (none.shape, none.placements)
    same(none, x[x[:, 0] > 100], "no True element")
    # torch's x[True] is x.unsqueeze(0) and x[False] its empty slice (the torch module's own index kernel asserts on a
    # 0-d bool index, so the expectations are written out)
    same(dx[torch.tensor(True)], x.unsqueeze(0), "0-d True")
    same(dx[torch.tensor(False)], x.unsqueeze(0)[0:0], "0-d False")
    raises(IndexError, lambda: dx[torch.ones(6, dtype=torch.bool)], contains="does not match the shape of the indexed tensor")
    raises(IndexError, lambda: dx[torch.ones(4, 6, 1, dtype=torch.bool)], contains="too many indices")


run(globals())
