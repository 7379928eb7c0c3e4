"""The short way of an operator call on distributed tensors (dtorch._fastpath) gives what the general way gives: the same
values, placements, returns, in-place identity and errors, and leaves to the general way (and to __torch_function__)
every call it does not take."""

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard, _bridge, _fastpath
from torch import _dispatch
from _testing import raises, run


def mesh():
    return dtorch.init_device_mesh("cpu", (4,))


def values():
    torch.manual_seed(3)
    return torch.randn(8, 6), torch.randn(6, 4), torch.randn(8, 6)


def test_torch_operators_on_distributed_tensors_take_the_short_way_and_agree_with_torch():
    x, w, y = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Shard(0)])
    dw = dtorch.distribute_tensor(w, mesh(), [Replicate()])
    dy = dtorch.distribute_tensor(y, mesh(), [Shard(0)])
    before = sum(len(keys) for keys in _fastpath._BINDINGS.values())
    out = torch.mm(dx, dw)
    assert isinstance(out, dtorch.Tensor) and out.placements == (Shard(0),)
    torch.testing.assert_close(out.to_torch(), x @ w)
    torch.testing.assert_close(F.linear(dx, dw.T).to_torch(), F.linear(x, w.T))
    torch.testing.assert_close(torch.add(dx, dy, alpha=2.0).to_torch(), torch.add(x, y, alpha=2.0))
    torch.testing.assert_close(torch.cat((dx, dy), dim=-1).to_torch(), torch.cat((x, y), dim=-1))
    torch.testing.assert_close(dx.view(4, 12).to_torch(), x.view(4, 12))
    torch.testing.assert_close(dx.amax(1, keepdim=True).to_torch(), x.amax(1, keepdim=True))
    assert sum(len(keys) for keys in _fastpath._BINDINGS.values()) > before, "no call was bound the short way"


def test_a_repeated_call_gives_the_same_as_its_first():
    x, w, _ = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Shard(0)])
    dw = dtorch.distribute_tensor(w, mesh(), [Replicate()])
    first = torch.mm(dx, dw).to_torch()
    for _ in range(3):
        torch.testing.assert_close(torch.mm(dx, dw).to_torch(), first)


def test_several_returns_and_list_returns_come_back_as_the_general_way_gives_them():
    x, _, _ = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Replicate()])
    top = torch.max(dx, 1)
    assert top.values.shape == (8,) and top.indices.shape == (8,)
    torch.testing.assert_close(top.values.to_torch(), torch.max(x, 1).values)
    parts = dx.split(3)
    assert isinstance(parts, list) and len(parts) == 3
    torch.testing.assert_close(parts[2].to_torch(), x.split(3)[2])


def test_an_in_place_operator_returns_the_tensor_it_wrote():
    x, _, y = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Shard(0)])
    dy = dtorch.distribute_tensor(y, mesh(), [Shard(0)])
    assert dtorch.aten("add_", (dx, dy)) is dx
    assert dtorch.aten("mul_", (dx, 2.0)) is dx
    torch.testing.assert_close(dx.to_torch(), (x + y) * 2.0)


def test_an_out_argument_takes_the_general_way_and_returns_the_out_tensor():
    x, _, y = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Shard(0)])
    dy = dtorch.distribute_tensor(y, mesh(), [Shard(0)])
    out = dtorch.zeros(8, 6, device_mesh=mesh(), placements=[Shard(0)])
    assert _fastpath.call("add", (dx, dy), {"out": out}) is _fastpath.MISS
    assert dtorch.aten("add", (dx, dy), {"out": out}) is out
    torch.testing.assert_close(out.to_torch(), x + y)


def test_values_the_short_way_does_not_take_get_the_general_ways_answers():
    x, _, _ = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Shard(0)])
    local = torch.ones(8, 6)
    assert _fastpath.call("add", (dx, local), None) is _fastpath.MISS
    raises(RuntimeError, torch.add, dx, local, contains="distribute the torch.Tensor")
    # A 0-dimensional torch.Tensor is replicated on the call's mesh, as the general way does.
    torch.testing.assert_close(torch.mul(dx, torch.tensor(3.0)).to_torch(), x * 3.0)
    assert _fastpath.call("view", (dx, [2 ** 63]), None) is _fastpath.MISS
    raises(OverflowError, dtorch.aten, "view", (dx, [2 ** 63]))
    raises(RuntimeError, torch.cat, (dx, local), contains="mixed torch.Tensor and dtorch.Tensor")


def test_the_runtimes_errors_are_the_general_ways():
    x, _, _ = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Shard(0)])
    try:  # the general way's Java call, as dtorch.aten makes it
        _bridge.call(_bridge.bridge().aten, "mm", "T,T", [dx._java, dx._java])
        raise AssertionError("mm of (8, 6) by (8, 6) was accepted")
    except Exception as e:  # noqa: B902 - whatever the general way raises is the expectation
        general = e
    for _ in range(2):  # the first call binds the overload, the second finds it kept
        short = raises(type(general), torch.mm, dx, dx)
        assert str(short) == str(general), (str(short), str(general))


def test_a_subclass_with_its_own_torch_function_goes_through_the_protocol():
    seen = []

    class Traced(dtorch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    x, w, _ = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Shard(0)])
    traced = Traced(dtorch.distribute_tensor(w, mesh(), [Replicate()])._java)
    torch.testing.assert_close(torch.mm(dx, traced).to_torch(), x @ w)
    assert seen == ["mm"], seen
    assert Traced not in _dispatch.fast_types


def test_distributed_parameters_take_the_short_way_as_first_argument():
    layer = torch.nn.Linear(6, 4, bias=False)
    reference = layer.weight.detach().clone()
    dtorch.distribute_module(layer, mesh())
    x, _, _ = values()
    dx = dtorch.distribute_tensor(x, mesh(), [Replicate()])
    torch.testing.assert_close(layer(dx).to_torch(), F.linear(x, reference))
    torch.testing.assert_close(F.linear(dx, layer.weight).to_torch(), F.linear(x, reference))
    assert type(layer.weight) in _dispatch.fast_types


def test_metadata_read_once_stays_right_after_a_parameter_gets_new_data():
    x, _, _ = values()
    p = torch.nn.Parameter(dtorch.distribute_tensor(x, mesh(), [Shard(0)]))
    assert p.placements == (Shard(0),) and p.shape == (8, 6)
    p.data = dtorch.distribute_tensor(x, mesh(), [Replicate()])
    assert p.placements == (Replicate(),)
    assert p.device_mesh == mesh() and p.device_mesh.shape == (4,)


run(globals())
