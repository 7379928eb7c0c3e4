"""A program of the differential tests (seed 7), on the runtime and on one device.

Run it with: ./dtorch run repro.py
"""

import dtorch
import torch
from dtorch import DeviceMesh, Partial, Replicate, Shard

# The tolerances of the differential tests: (rtol, atol) per floating dtype; integers and bools must be equal.
_TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (2e-2, 6e-2), torch.float16: (2e-3, 2e-3), torch.float64: (1e-4, 1e-4)}


def _outs(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _place(t, mesh, placements):
    if any(isinstance(p, Partial) for p in placements):
        whole = [Replicate() if isinstance(p, Partial) else p for p in placements]
        return dtorch.Tensor(t, device_mesh=mesh, placements=whole).redistribute(mesh, placements)
    return dtorch.Tensor(t, device_mesh=mesh, placements=placements)


def _check(name, got, want):
    assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype, \
        "%s: got %s %s, torch gives %s %s" % (name, got.dtype, tuple(got.shape), want.dtype, tuple(want.shape))
    if want.dtype not in _TOLERANCE:
        assert torch.equal(got, want), "%s: got %s, torch gives %s" % (name, got, want)
        return
    rtol, atol = _TOLERANCE[want.dtype]
    g, w = got.double(), want.double()
    finite = torch.isfinite(w)
    assert torch.equal(torch.isfinite(g), finite), "%s: non-finite values differ: got %s, torch gives %s" % (name, got, want)
    both = torch.isinf(w) & torch.isinf(g)
    assert torch.equal(g[both], w[both]), "%s: infinities differ: got %s, torch gives %s" % (name, got, want)
    scale = max(1.0, w.abs()[finite].max().item()) if bool(finite.any()) else 1.0
    close = (g - w).abs()[finite] <= (w.abs()[finite] * rtol + atol * scale)
    assert bool(close.all()), "%s: values differ: got %s, torch gives %s" % (name, got, want)


m0 = DeviceMesh("cpu", [1, 0])
m1 = DeviceMesh("cpu", [[3, 2], [1, 0]])

_x0 = torch.tensor([-1.0, 1.75, 1.0, 0.25, 1.5, 0.0, 0.0, 0.25, -0.75, -2.0, -0.25, -1.25], dtype=torch.float32).reshape([4, 3])
_x1 = torch.tensor([5, 5, 0], dtype=torch.int64).reshape([3])

# The program on the runtime.
v0 = _place(_x0, m0, [Shard(0)])
v1 = _place(_x1, m0, [Partial()])
v2 = v0.add(v1)
v3, v4 = _outs(dtorch.aten('split', (v2, 3), {'dim': 0}))
v5, = _outs(dtorch.aten('amax', (v3,), {'dim': [1], 'keepdim': True}))
v6 = v4.redistribute(m1, [Shard(1), Replicate()])
v5.add_(1.5)
v5[1:, 0] = -2

# The same program on one device.
r0 = _x0.clone()
r1 = _x1.clone()
r2 = r0.add(r1)
r3, r4 = _outs(torch.split(r2, 3, dim=0))
r5, = _outs(torch.amax(r3, dim=[1], keepdim=True))
r6 = r4.clone()
r5.add_(1.5)
r5[1:, 0] = -2

_check("v5", v5.to_torch(), r5)
_check("v6", v6.to_torch(), r6)
print("every value matches torch")
