"""Autograd and the optimizers on a GPU: gradients, fused and multi-tensor Adam, SGD with momentum and gradient clipping
on CUDA tensors, checked against the same steps on the CPU."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _testing import run  # noqa: E402


def twin_models():
    torch.manual_seed(31)
    cpu = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    gpu = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    gpu.load_state_dict(cpu.state_dict())
    return cpu, gpu.cuda()


def same(cpu_model, gpu_model, what, atol=1e-4):
    for (name, a), b in zip(cpu_model.named_parameters(), gpu_model.parameters()):
        assert b.is_cuda, (what, name)
        assert torch.allclose(a, b.cpu(), atol=atol, rtol=1e-4), (what, name, (a - b.cpu()).abs().max().item())


def test_gradients_on_cuda_match_the_cpu():
    cpu, gpu = twin_models()
    x = torch.randn(8, 16)
    target = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    F.cross_entropy(cpu(x), target).backward()
    F.cross_entropy(gpu(x.cuda()), target.cuda()).backward()
    for (name, a), b in zip(cpu.named_parameters(), gpu.parameters()):
        assert b.grad.is_cuda and torch.allclose(a.grad, b.grad.cpu(), atol=1e-5, rtol=1e-4), name


def test_optimizers_step_on_cuda_as_on_the_cpu():
    for make in (lambda ps: torch.optim.Adam(ps, lr=0.01),
                 lambda ps: torch.optim.AdamW(ps, lr=0.01, amsgrad=True, fused=False),
                 lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True)):
        cpu, gpu = twin_models()
        x = torch.randn(8, 16)
        y = torch.randn(8, 4)
        for model, device in ((cpu, "cpu"), (gpu, "cuda")):
            opt = make(model.parameters())
            for _ in range(3):
                opt.zero_grad()
                F.mse_loss(model(x.to(device)), y.to(device)).backward()
                nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                opt.step()
        same(cpu, gpu, type(opt).__name__)


run(globals())
