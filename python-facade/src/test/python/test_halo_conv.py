"""Halo convolution: dtorch.nn.functional.conv2d on an input sharded on its height exchanges halo rows
with the devices that hold them instead of gathering the input (past a neighbour whose share is shorter than the halo, or
empty), keeps the output height-sharded, and equals torch.nn.functional.conv2d on one device; where no halo serves
(stride 2 in height, an output shorter than the input) it gathers as before and still equals torch."""

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard
from dtorch._tensor import _collective_count
from _testing import run

DF = dtorch.nn.functional
ROWS = 7  # uneven over 2, 3 and 4 devices

LAYOUTS = [((2,), [Shard(2)]), ((3,), [Shard(2)]), ((4,), [Shard(2)]), ((2, 2), [Replicate(), Shard(2)])]


def integers(*shape):
    """Small integers as float32: every sum of products is exact, so results must be equal, not close."""
    return torch.randint(-3, 4, shape).float()


def halo_cases(x, w3, w5, wg, b3, bg):
    """(what, halo rows, f(functional module, input, weight, bias)) for convolutions whose output height is the input's."""
    return [
        ("k3 p1 bias", 1, lambda f, a: f.conv2d(a[0], a[1], a[2], padding=1), (x, w3, b3)),
        ("k5 p2, width unpadded", 2, lambda f, a: f.conv2d(a[0], a[1], padding=(2, 0)), (x, w5)),
        ("same, width dilated", 1, lambda f, a: f.conv2d(a[0], a[1], padding="same", dilation=(1, 2)), (x, w3)),
        ("groups 2, width stride 2", 1, lambda f, a: f.conv2d(a[0], a[1], a[2], stride=(1, 2), padding=1, groups=2), (x, wg, bg)),
        ("k3 dilated 2 p2", 2, lambda f, a: f.conv2d(a[0], a[1], padding=(2, 1), dilation=(2, 1)), (x, w3)),
    ]


def counts():
    return _collective_count("all_gather"), _collective_count("point_to_point")


def distribute(tensors, mesh, placements):
    return [dtorch.Tensor(t, device_mesh=mesh, placements=placements if i == 0 else [Replicate()] * mesh.ndim)
            for i, t in enumerate(tensors)]


def test_height_sharded_conv2d_exchanges_halos_and_equals_torch_exactly():
    torch.manual_seed(13)
    x = integers(2, 4, ROWS, 6)
    cases = halo_cases(x, integers(5, 4, 3, 3), integers(3, 4, 5, 5), integers(6, 2, 3, 3), integers(5), integers(6))
    for shape, placements in LAYOUTS:
        mesh = dtorch.init_device_mesh("cpu", shape)
        for what, halo, f, tensors in cases:
            inputs = distribute(tensors, mesh, placements)
            dtorch.sync()
            gathers, p2p = counts()
            out = f(DF, inputs)
            dtorch.sync()
            gathers, p2p = counts()[0] - gathers, counts()[1] - p2p
            where = (what, shape, placements)
            # A 2-row halo over shares of one row (7 rows over 4 devices) reaches past the neighbour: still no gather.
            assert out.placements == tuple(placements), (where, out.placements)
            assert gathers == 0, (where, "the input was gathered", gathers)
            assert p2p == mesh.size(), (where, "one halo batch per device", p2p)
            assert torch.equal(out.to_torch(), f(F, tensors)), where


def test_heights_shorter_than_the_devices_keep_their_shards():
    torch.manual_seed(17)
    mesh = dtorch.init_device_mesh("cpu", (4,))
    for rows in (2, 3):  # the last devices hold no row; their halos come from the devices that do
        x = integers(2, 4, rows, 6)
        for what, halo, f, tensors in halo_cases(x, integers(5, 4, 3, 3), integers(3, 4, 5, 5), integers(6, 2, 3, 3), integers(5),
                                                 integers(6)):
            out = f(DF, distribute(tensors, mesh, [Shard(2)]))
            assert out.placements == (Shard(2),), (what, rows, out.placements)
            assert torch.equal(out.to_torch(), f(F, tensors)), (what, rows)


def test_random_floats_are_close_to_torch():
    torch.manual_seed(5)
    x, w, b = torch.randn(2, 3, 9, 8), torch.randn(4, 3, 3, 3), torch.randn(4)
    want = F.conv2d(x, w, b, padding=1)
    for shape in [(2,), (3,), (4,)]:
        mesh = dtorch.init_device_mesh("cpu", shape)
        dx, dw, db = distribute((x, w, b), mesh, [Shard(2)])
        out = DF.conv2d(dx, dw, db, padding=1)
        assert out.placements == (Shard(2),)
        assert torch.allclose(out.to_torch(), want, rtol=1e-5, atol=1e-6), shape


def test_the_generic_operators_and_channels_last_inputs_take_the_halo_too():
    torch.manual_seed(7)
    x, w, b = integers(2, 4, ROWS, 6), integers(5, 4, 3, 3), integers(5)
    want = F.conv2d(x, w, b, padding=1)
    mesh = dtorch.init_device_mesh("cpu", (3,))
    dx, dw, db = distribute((x, w, b), mesh, [Shard(2)])
    channels_last = dx.clone(memory_format=torch.channels_last)
    for what, out in [("dtorch.conv2d", dtorch.conv2d(dx, dw, db, 1, 1)),
                      ("dtorch.convolution", dtorch.convolution(dx, dw, db, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)),
                      ("channels-last", DF.conv2d(channels_last, dw, db, padding=1))]:
        assert out.placements == (Shard(2),), (what, out.placements)
        assert torch.equal(out.to_torch(), want), what


def test_where_no_halo_serves_the_input_is_gathered_and_the_result_equals_torch():
    torch.manual_seed(3)
    x, w, w4 = integers(2, 4, ROWS, 6), integers(3, 4, 3, 3), integers(3, 4, 4, 3)
    mesh = dtorch.init_device_mesh("cpu", (2,))
    dx, dw, dw4 = distribute((x, w, w4), mesh, [Shard(2)])
    cases = [("stride 2 in height", lambda f, a, k: f.conv2d(a, k, stride=(2, 1), padding=1), dw, w),
             ("unpadded: a shorter output", lambda f, a, k: f.conv2d(a, k), dw, w),
             ("even kernel, same: asymmetric", lambda f, a, k: f.conv2d(a, k, padding="same"), dw4, w4)]
    for what, f, dk, k in cases:
        gathers = _collective_count("all_gather")
        out = f(DF, dx, dk)
        dtorch.sync()
        assert out.placements == (Replicate(),) and _collective_count("all_gather") > gathers, (what, out.placements)
        assert torch.equal(out.to_torch(), f(F, x, k)), what


run(globals())
