"""Views and shape operators on distributed tensors (the view family of the generic path), and indexing: reshape,
permute, select, slice, pad, repeat, ... and dx[...], dx[...] = v (in place) on 1-, 2-, 4- and 2x2-device meshes with several
placements (uneven sizes included), compared with the same operator in torch on one device."""

import random

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run
from test_generic_ops import meshes, wrap


def on_meshes(cases):
    """Each case with a mesh, taking the meshes in turn (every mesh sees every kind of case, at a quarter of the cost)."""
    all_meshes = meshes()
    return [(all_meshes[i % len(all_meshes)], case) for i, case in enumerate(cases)]


def placements_for(mesh, shape, rng, partial=True):
    """Random placements: R, S(d) where every device gets an element of d (uneven shards included), or P(sum)."""
    out = []
    ways = [1] * len(shape)
    for m in range(mesh.ndim):
        choice = rng.randrange(4 if partial else 3)
        d = rng.randrange(len(shape))
        if choice == 3:
            out.append(Partial())
        elif choice > 0 and shape[d] >= ways[d] * mesh.shape[m]:
            ways[d] *= mesh.shape[m]
            out.append(Shard(d))
        else:
            out.append(Replicate())
    return out


def same(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    ok = torch.allclose(got, want, atol=1e-6) if want.dtype.is_floating_point else torch.equal(got, want)
    assert ok, (what, got.tolist(), want.tolist())


def source(rng, integer):
    shape = (rng.randrange(3, 8), rng.randrange(3, 7), rng.randrange(2, 6))
    return torch.randint(0, 50, shape) if integer else torch.rand(*shape)


# Each: a name, and one function that applies the operator to a torch.Tensor or a dtorch.Tensor alike.
OPS = [
    ("reshape merge", lambda t: t.reshape(t.shape[0] * t.shape[1], t.shape[2])),
    ("reshape split", lambda t: t.reshape(2, -1, t.shape[2]) if t.shape[0] % 2 == 0 else t.reshape(-1)),
    ("view", lambda t: t.view(t.shape[0], -1)),
    ("flatten", lambda t: t.flatten(1)),
    ("unflatten", lambda t: t.unflatten(2, (t.shape[2], 1))),
    ("permute", lambda t: t.permute(2, 0, 1)),
    ("transpose", lambda t: t.transpose(0, 2)),
    ("movedim", lambda t: t.movedim(0, -1)),
    ("unsqueeze squeeze", lambda t: t.unsqueeze(1).squeeze(1)),
    ("expand", lambda t: t[:, :1].expand(-1, 3, -1)),
    ("narrow", lambda t: t.narrow(1, 1, t.shape[1] - 1)),
    ("select", lambda t: t.select(0, -1)),
    ("repeat", lambda t: t.repeat(1, 2, 1)),
    ("repeat_interleave", lambda t: t.repeat_interleave(2, dim=2)),
    ("flip", lambda t: t.flip([1])),
    ("roll", lambda t: t.roll(1, 0)),
]


def test_view_operators_match_torch_on_every_mesh_and_placement():
    rng = random.Random(5)
    torch.manual_seed(5)
    for mesh, (name, op) in on_meshes(OPS * 2):
        x = source(rng, integer=rng.random() < 0.5)
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng))
        same(op(dx).to_torch(), op(x), (name, mesh, dx.placements))


def test_pad_matches_torch_and_keeps_partial_sums_only_for_zero_padding():
    rng = random.Random(6)
    for mesh in meshes():
        x = torch.rand(5, 6)
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng))
        F = torch.nn.functional
        same(dtorch.nn.functional.pad(dx, (1, 2)).to_torch(), F.pad(x, (1, 2)), (mesh, dx.placements))
        same(dtorch.nn.functional.pad(dx, (0, 0, 2, 1), value=1.5).to_torch(), F.pad(x, (0, 0, 2, 1), value=1.5), mesh)
    mesh = dtorch.init_device_mesh("cpu", (2,))
    p = wrap(torch.ones(4, 4), mesh, [Partial()])
    assert dtorch.nn.functional.pad(p, (1, 1)).placements == (Partial(),)
    padded = dtorch.nn.functional.pad(p, (1, 1), value=1.0)
    assert padded.placements == (Replicate(),)
    same(padded.to_torch(), torch.nn.functional.pad(torch.ones(4, 4), (1, 1), value=1.0), "pad of P(sum) by 1")


def test_shards_survive_views_that_keep_their_dimension_and_even_merges():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[Shard(0)])
    assert dx.reshape(48).placements == (Shard(0),)
    assert dx.t().placements == (Shard(1),)
    assert dx[:, 1:4].placements == (Shard(0),)
    assert dx[1:5].placements == (Replicate(),)
    odd = dtorch.Tensor(torch.rand(5, 6), device_mesh=mesh, placements=[Shard(0)])
    assert odd.reshape(30).placements == (Replicate(),)
    same(odd.reshape(30).to_torch(), odd.to_torch().reshape(30), "uneven merge")


def index_cases(t):
    n0, n1, n2 = t.shape
    return [1, -1, slice(1, 5), slice(None, None, 2), (slice(1, None), 2), (Ellipsis, 1), (None, 0), (0, None, slice(1, 3)),
            (slice(None), slice(1, n1, 2), slice(None, -1)), (Ellipsis, None), ([0, n0 - 1, 1],), (slice(None), [1, 0, 1]),
            (slice(None), torch.tensor([[0, 1], [1, 0]])),
            # several long indices: adjacent ones put their broadcast dimensions in place, separated ones in front
            ([0, n0 - 1, -2], [1, 0, n1 - 1]), (slice(None), [2, 0], torch.tensor([[1], [0]])), ([1, 0], slice(1, None), [0, 1]),
            (Ellipsis, [1, 1], [0, 1]), (None, [2, 1], 0, [1, 0]), (1, [0, 2], [1, 0])]


def test_getitem_matches_torch():
    rng = random.Random(7)
    torch.manual_seed(7)
    x = source(rng, integer=True)
    for mesh, index in on_meshes(index_cases(x) * 2):
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng))
        same(dx[index].to_torch(), x[index], (index, mesh, dx.placements))
    mesh = meshes()[3]
    idx = dtorch.Tensor(torch.tensor([2, 0]), device_mesh=mesh, placements=[Replicate()] * mesh.ndim)
    dx = wrap(x, mesh, [Shard(1), Shard(0)])
    same(dx[:, idx].to_torch(), x[:, torch.tensor([2, 0])], (mesh, dx.placements))
    # Indices held on the devices, several: combined there.
    other = dtorch.Tensor(torch.tensor([[1], [0]]), device_mesh=mesh, placements=[Replicate()] * mesh.ndim)
    same(dx[idx, other].to_torch(), x[torch.tensor([2, 0]), torch.tensor([[1], [0]])], (mesh, dx.placements))
    same(dx[:, idx, [1, 0]].to_torch(), x[:, torch.tensor([2, 0]), torch.tensor([1, 0])], (mesh, dx.placements))
    dy = wrap(x, mesh, [Shard(2), Replicate()])
    picked = dy[idx, other]
    assert picked.placements == (Shard(2), Replicate()), picked.placements  # a dimension not indexed keeps its shards
    # The derivative of several indices is index_select's: the gradient lands on the picked positions, summed where an
    # index repeats, with the tensor's placements.
    leaf = wrap(torch.rand(4, 5, 6), mesh, [Shard(1), Replicate()]).requires_grad_(True)
    local = leaf.to_torch().clone().requires_grad_(True)
    leaf[[0, 2, 2], :, [1, 3, 1]].pow(2).sum().backward()
    local[[0, 2, 2], :, [1, 3, 1]].pow(2).sum().backward()
    same(leaf.grad.to_torch(), local.grad, "gradient through several indices")
    assert leaf.grad.placements == leaf.placements


def test_setitem_matches_torch_in_place():
    rng = random.Random(8)
    torch.manual_seed(8)
    indices = [1, slice(1, 4), (slice(None), slice(0, None, 2)), (Ellipsis, -1), (slice(1, 3), 0, slice(1, None)), slice(None),
               (None, -2), (slice(None), 1, slice(None, None, 2)), (slice(None), [2, 0]), (1, slice(None), torch.tensor([1, 0])),
               ([0, 2], [1, 0]), (slice(None), [1, 0], [0, 1]), ([2, 1], slice(None), [1, 0]), (torch.tensor([[0], [1]]),),
               (Ellipsis, [0, 1], torch.tensor([1, 0]))]
    for mesh, index in on_meshes(indices):
        x = source(rng, integer=False)
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng))
        alias = dx
        before = dx.to_torch()
        earlier = dx * 1
        want = x.clone()
        want[index] = 7.0
        dx[index] = 7.0
        same(dx.to_torch(), want, (index, mesh, "number"))
        assert alias is dx
        same(earlier.to_torch(), before, "a tensor computed before keeps the old values")
        value = torch.rand(want[index].shape) if want[index].dim() > 0 else torch.rand(())
        dv = wrap(value, mesh, placements_for(mesh, value.shape, rng)) if value.dim() > 0 else \
            dtorch.Tensor(value, device_mesh=mesh, placements=[Replicate()] * mesh.ndim)
        want[index] = value
        dx[index] = dv
        same(dx.to_torch(), want, (index, mesh, dx.placements, dv.placements))
    for mesh in meshes():
        x = source(rng, integer=True)
        dx = wrap(x, mesh, placements_for(mesh, x.shape, rng, partial=False))
        row = torch.randint(0, 9, (x.shape[2],))
        want = x.clone()
        want[1:3] = row
        dx[1:3] = dtorch.Tensor(row, device_mesh=mesh, placements=[Replicate()] * mesh.ndim)
        same(dx.to_torch(), want, "broadcast value")
        mask = x > 25
        want[mask] = -1
        dx[wrap(mask, mesh, placements_for(mesh, mask.shape, rng, partial=False))] = -1
        same(dx.to_torch(), want, "bool mask")


def test_bad_indices_raise_python_errors():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx = dtorch.Tensor(torch.rand(4, 3), device_mesh=mesh, placements=[Shard(0)])
    raises(IndexError, lambda: dx[4])
    raises(IndexError, lambda: dx[0, 0, 0])
    raises(ValueError, lambda: dx[::-1])
    raises(TypeError, lambda: dx["a"])
    raises(IndexError, lambda: dx[dx[0].gt(0.5)], contains="does not match the shape of the indexed tensor")

    raises(IndexError, lambda: dx[[0, 1], [0, 3]], contains="index 3 is out of bounds for dimension 1 with size 3")
    raises(IndexError, lambda: dx[[0, 1, 2], [0, 1]], contains="shape mismatch")
    raises(IndexError, lambda: dx[[0.5], [1]], contains="tensors used as indices must be long")
    raises(IndexError, lambda: dx[[0.5]], contains="tensors used as indices must be long")
    same(dx[[True, False, False, True]].to_torch(), dx.to_torch()[torch.tensor([True, False, False, True])], "a list of bools")
    held = dtorch.Tensor(torch.tensor([0, 5]), device_mesh=mesh, placements=[Replicate()])
    raises(Exception, lambda: dx[held, held].to_torch(), contains="index out of range")

    def assign_beyond_int64():
        dx[2 ** 70:] = 1.0
    raises(ValueError, assign_beyond_int64, contains="beyond int64")
    torch.testing.assert_close(dx.to_torch().shape, torch.Size([4, 3]))  # nothing was written or broken
    dx[1:3, -1] = 2.0
    assert dx.to_torch()[1:3, 2].tolist() == [2.0, 2.0]


if __name__ == "__main__":
    run(globals())
