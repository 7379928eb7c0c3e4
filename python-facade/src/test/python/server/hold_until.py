"""Runs one distributed operator, says it started, then waits (at most 300 s) until the file named by its first argument
exists: the test looks at the run's worker processes meanwhile."""
import os
import sys
import time

import dtorch
from dtorch import Shard

mesh = dtorch.init_device_mesh("cpu", (4,))
print(dtorch.ones(8, device_mesh=mesh, placements=[Shard(0)]).sum().item())
print("started", flush=True)
deadline = time.monotonic() + 300
while not os.path.exists(sys.argv[1]):
    if time.monotonic() > deadline:
        print("not released within 300 s")
        sys.exit(1)
    time.sleep(0.05)
