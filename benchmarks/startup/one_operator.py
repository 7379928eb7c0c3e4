"""One distributed operator: a 4-device mesh, one sharded tensor, its sum brought back to Python."""
import dtorch
from dtorch import Shard

mesh = dtorch.init_device_mesh("cpu", (4,))
t = dtorch.ones(8, 4, device_mesh=mesh, placements=[Shard(0)])
print(t.sum().item())
