"""torch and dtorch together, as DTorch's scripts mix them: inputs made with torch, wrapped on a mesh, values back as
torch.Tensors and compared with torch."""

import asyncio

import dtorch
import torch
from dtorch import Shard, Replicate, Partial
from _testing import raises, run


def mesh():
    return dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))


def test_wrap_a_torch_tensor_and_get_a_torch_tensor_back():
    torch.manual_seed(1)
    x = torch.randn(8, 6)
    w = torch.randn(6, 4)
    dx = dtorch.Tensor(x, device_mesh=mesh(), placements=[Shard(0), Replicate()])
    dw = dtorch.distribute_tensor(w, mesh(), [Replicate(), Shard(1)])
    assert dx.shape == (8, 6) and dx.placements == (Shard(0), Replicate())
    out = (dx @ dw).relu().to_torch()
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    torch.testing.assert_close(out, (x @ w).relu())
    assert torch.allclose(out.sum(1), (x @ w).relu().sum(1), atol=1e-5)


def test_values_back_through_every_path():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    d = dtorch.tensor(x, device_mesh=mesh(), placements=[Shard(1), Replicate()])
    assert torch.equal(d.to_torch(), x)
    assert torch.equal(dtorch._GetTensorAsync(d * 2).get(), x * 2)

    async def main():
        return await (d + 1).to_torch_async()

    assert torch.equal(asyncio.run(main()), x + 1)
    value = d.to_torch()
    assert value.memoryview().tolist() == x.tolist() and value.tolist() == x.tolist()


def test_dtypes_are_shared():
    assert dtorch.float32 is torch.float32 and dtorch.int64 is torch.int64
    d = dtorch.tensor(torch.tensor([1, 2, 3]), device_mesh=mesh(), placements=[Replicate(), Replicate()])
    assert d.dtype == torch.int64 and d.to_torch().dtype == dtorch.int64
    assert dtorch.tensor(torch.ones(2), dtype=torch.float64, device_mesh=mesh()).dtype == torch.float64


def test_a_value_that_came_back_goes_in_again_and_into_torch_operators():
    v = (dtorch.ones(4, 4, device_mesh=mesh(), placements=[Shard(0), Shard(1)]) * 3).to_torch()
    again = dtorch.Tensor(v, device_mesh=mesh(), placements=[Replicate(), Shard(0)])
    assert (again.sum(0).to_torch() == 12.0).all()
    assert torch.nn.functional.softmax(v, dim=-1).sum().item() == 4.0


def test_bad_wraps_are_refused():
    raises(TypeError, dtorch.Tensor, [1, 2], device_mesh=mesh(), contains="torch.Tensor")
    raises(TypeError, dtorch.distribute_tensor, [1, 2], mesh(), [Replicate(), Replicate()])
    raises(ValueError, dtorch.Tensor, torch.ones(2), device_mesh=mesh(), placements=[Partial(), Replicate()])


run(globals())
