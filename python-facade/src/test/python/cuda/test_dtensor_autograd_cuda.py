"""Autograd through distributed tensors on CUDA meshes, where derivatives take kernels libtorch has only for CUDA (RMS
norm's fused derivative) or chooses by device (attention's, libtorch's own derivative on every device); compared with
the shim's autograd on the host."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dtorch  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from dtorch import Shard, Replicate  # noqa: E402
from _testing import run  # noqa: E402


def test_rms_norm_gradients_on_any_placement():
    mesh = dtorch.init_device_mesh(dtorch.device_type(), (4,))
    torch.manual_seed(5)
    x = torch.randn(4, 6, 8)
    w = torch.rand(8) + 0.5
    g = torch.randn(4, 6, 8)
    for eps in (1e-6, None):
        lx = x.clone().requires_grad_(True)
        lw = w.clone().requires_grad_(True)
        F.rms_norm(lx, [8], lw, eps).backward(g)
        for placement in (Replicate(), Shard(0), Shard(1), Shard(2)):
            dx = dtorch.distribute_tensor(x, mesh, [placement]).requires_grad_(True)
            dw = dtorch.distribute_tensor(w, mesh, [Replicate()]).requires_grad_(True)
            out = dtorch.nn.functional.rms_norm(dx, [8], dw, eps)
            out.backward(dtorch.distribute_tensor(g, mesh, [placement]))
            what = (eps, placement)
            assert dx.grad.placements == (placement,) and dw.grad.placements == (Replicate(),), (what, dx.grad.placements)
            assert torch.allclose(dx.grad.full_tensor().cpu(), lx.grad, atol=1e-5, rtol=1e-4), what
            assert torch.allclose(dw.grad.full_tensor().cpu(), lw.grad, atol=1e-5, rtol=1e-4), what



def test_attention_gradients_on_any_placement():
    mesh = dtorch.init_device_mesh(dtorch.device_type(), (4,))
    torch.manual_seed(6)
    q = torch.randn(4, 4, 6, 8)
    cases = [(dict(is_causal=True), 4), (dict(enable_gqa=True), 2), (dict(attn_mask=torch.randn(6, 6), scale=0.3), 4)]
    for kwargs, kv_heads in cases:
        k = torch.randn(4, kv_heads, 6, 8)
        v = torch.randn(4, kv_heads, 6, 8)
        g = torch.randn(4, 4, 6, 8)
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        F.scaled_dot_product_attention(*leaves, **kwargs).backward(g)
        for placement in (Replicate(), Shard(0), Shard(1), Shard(2)):
            if kv_heads != 4 and placement == Shard(1):
                continue  # two key heads over four devices: gathered, as Replicate() checks
            ds = [dtorch.distribute_tensor(t, mesh, [placement]).requires_grad_(True) for t in (q, k, v)]
            dk = dict(kwargs)
            if "attn_mask" in dk:
                dk["attn_mask"] = dtorch.distribute_tensor(dk["attn_mask"], mesh, [Replicate()])
            out = F.scaled_dot_product_attention(*ds, **dk)
            out.backward(dtorch.distribute_tensor(g, mesh, list(out.placements)))
            for name, d, want in zip("qkv", ds, leaves):
                what = (sorted(kwargs), placement, name)
                assert d.grad.placements == (placement,), (what, d.grad.placements)
                assert torch.allclose(d.grad.full_tensor().cpu(), want.grad, atol=1e-4, rtol=1e-4), what


if __name__ == "__main__":
    run(globals())
