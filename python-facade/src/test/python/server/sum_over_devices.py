"""A sum over the shards of every device, with torch's own sum beside it; then exits with status 3, so that the exit code
is compared too. The device count is the first argument."""
import sys

import torch
import dtorch
from dtorch import Shard

devices = int(sys.argv[1])
mesh = dtorch.init_device_mesh("cpu", (devices,))
t = dtorch.arange(0, 12, dtype=torch.float32, device_mesh=mesh, placements=[Shard(0)])
print((t * 3).sum().item(), (torch.arange(0, 12, dtype=torch.float32) * 3).sum().item())
sys.exit(3)
