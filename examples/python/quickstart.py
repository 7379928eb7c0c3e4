"""dtorch quickstart: a device mesh, sharded factories, one tensor-parallel MLP step, and `await` on a future.

Run it with:  ./dtorch run examples/python/quickstart.py
On one GPU:   ./dtorch run --devices cuda:4 --same-device examples/python/quickstart.py   (the -Pgpu build)

--device cpu|cuda names the mesh's device type; by default it is the runtime's (dtorch.device_type()), which the
launcher's --devices flag chooses. With --same-device the 4 ranks share cuda:0.
"""

import argparse
import asyncio
import math

import dtorch
import torch
from dtorch import Replicate, Shard

parser = argparse.ArgumentParser(description="dtorch quickstart")
parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="the mesh's device type (default: the runtime's, set by ./dtorch run --devices)")
device = parser.parse_args().device or dtorch.device_type()

# A 2 x 2 mesh of the runtime's 4 devices: "dp" (data parallel) by "tp" (tensor parallel).
mesh = dtorch.init_device_mesh(device, (2, 2), mesh_dim_names=("dp", "tp"))
print("mesh:", mesh)

dtorch.manual_seed(0)
batch, d_in, d_hidden, d_out = 8, 32, 64, 16
# The batch is split over dp and replicated over tp; the weights are split over tp (Megatron style).
x = dtorch.randn(batch, d_in, device_mesh=mesh, placements=[Shard(0), Replicate()])
w1 = dtorch.randn(d_hidden, d_in, device_mesh=mesh, placements=[Replicate(), Shard(0)]) / math.sqrt(d_in)
w2 = dtorch.randn(d_out, d_hidden, device_mesh=mesh, placements=[Replicate(), Shard(1)]) / math.sqrt(d_hidden)
w2.requires_grad_()  # the weight this script trains
target = dtorch.zeros(batch, d_out, device_mesh=mesh, placements=[Shard(0), Replicate()])

# Forward: column-parallel linear (hidden split by feature), then row-parallel linear (a partial sum over tp).
h = dtorch.linear(x, w1).gelu()
print("h:", h)
y_partial = dtorch.linear(h, w2)
print("y (partial over tp):", y_partial.placements)
y = y_partial.redistribute(mesh, [Shard(0), Replicate()])  # one all-reduce along tp
loss = ((y - target) * (y - target)).mean()
print("loss:", loss)

# One step of gradient descent on w2: backward() runs the derivatives as distributed operators (dL/dw2 is a partial sum
# over dp, all-reduced into w2's placements), and SGD updates each device's shard of w2 in place.
loss.backward()
print("w2.grad:", w2.grad.placements)
torch.optim.SGD([w2], lr=0.1).step()


@torch.no_grad()
def loss_after_step():
    y2 = dtorch.linear(h, w2).redistribute(mesh, [Shard(0), Replicate()])
    return ((y2 - target) * (y2 - target)).mean()


async def main():
    # to_torch_async() returns at once; awaiting does not poll: the runtime wakes the event loop.
    before, after = await asyncio.gather(loss.to_torch_async(), loss_after_step().to_torch_async())
    print("loss before the step: %.6f" % before.item())
    print("loss after the step:  %.6f" % after.item())
    assert after.item() < before.item(), "one gradient step must lower the loss"
    print("OK")


asyncio.run(main())
