"""The torch module on a GPU: tensors made on, moved to and computed on CUDA, checked against the same on the CPU."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dtorch  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _testing import raises, run  # noqa: E402


def test_cuda_is_there():
    assert torch.cuda.is_available() and torch.cuda.device_count() >= 1


def test_factories_and_moves():
    x = torch.ones(2, 3, device="cuda")
    assert x.is_cuda and x.device == torch.device("cuda:0") and str(x.device) == "cuda:0"
    assert x.sum().item() == 6.0 and x.tolist() == [[1.0] * 3] * 2
    y = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert y.cuda().is_cuda and y.to("cuda").cpu().tolist() == y.tolist() and not y.cuda().cpu().is_cuda
    assert torch.tensor([1, 2], device="cuda").is_cuda
    assert "device='cuda:0'" in repr(x)


def test_operators_on_cuda_match_the_cpu():
    torch.manual_seed(0)
    a = torch.randn(64, 32)
    w = torch.randn(32, 16)
    on_gpu = F.softmax((a.cuda() @ w.cuda()).relu(), dim=-1)
    assert on_gpu.is_cuda
    torch.testing.assert_close(on_gpu.cpu(), F.softmax((a @ w).relu(), dim=-1), rtol=1e-4, atol=1e-5)
    q = torch.randn(2, 4, 8, 16, device="cuda")
    assert F.scaled_dot_product_attention(q, q, q, is_causal=True).shape == (2, 4, 8, 16)
    g = torch.zeros(3, 3, device="cuda")
    g[1, 1:] = 5.0
    g += 1
    assert g.cpu().tolist() == [[1.0] * 3, [1.0, 6.0, 6.0], [1.0] * 3]
    raises(RuntimeError, torch.add, torch.ones(2, device="cuda"), torch.ones(2), contains="device")


def test_a_cuda_tensor_goes_onto_a_mesh_and_comes_back():
    mesh = dtorch.init_device_mesh("cuda", (2, 2))
    x = torch.randn(8, 4, device="cuda")
    d = dtorch.Tensor(x, device_mesh=mesh, placements=[dtorch.Shard(0), dtorch.Replicate()])
    back = (d * 2).to_torch()
    torch.testing.assert_close(back, (x * 2).cpu())


run(globals())
