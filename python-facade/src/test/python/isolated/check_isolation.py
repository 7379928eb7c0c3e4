"""Run by IsolatedRunTest under `dtorch run --isolated`: what still works, and what the context refuses."""

import asyncio
import os
import subprocess

import dtorch

HERE = os.path.dirname(os.path.abspath(__file__))


def refused(what, fn, *errors):
    try:
        fn()
    except errors as error:
        return error
    raise AssertionError(what + " was not refused")


# Values come back through tolist() and item().
mesh = dtorch.init_device_mesh("cpu", (2,))
x = dtorch.arange(6, device_mesh=mesh, placements=[dtorch.Shard(0)])
value = (x * 2).to_torch()
assert value.tolist() == [0, 2, 4, 6, 8, 10], value.tolist()
assert x.sum().to_torch().item() == 15


# await works: the package runs asyncio on a loop that needs no self-pipe socket.
async def fetch():
    first = (x + 1).to_torch_async()
    second = (x + 2).to_torch_async()
    return [(await first).tolist(), (await second).tolist()]


assert asyncio.run(fetch()) == [[1, 2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 7]]

# Zero-copy views need ctypes, hence native access: a clear error instead.
for method in (value.memoryview, value.tobytes):
    error = refused(method.__name__ + "()", method, RuntimeError)
    assert "--isolated" in str(error) and "tolist()" in str(error), error
refused("import ctypes", lambda: __import__("ctypes"), ImportError)

# The script's directory is readable, relative paths included (it is the working directory), and read-only.
with open(os.path.join(HERE, "data.txt")) as f:
    assert f.read().strip() == "readable next to the script"
with open("data.txt") as f:
    assert f.read().strip() == "readable next to the script"
assert os.getcwd() == HERE, os.getcwd()
assert "check_isolation.py" in os.listdir(HERE)
refused("writing next to the script", lambda: open(os.path.join(HERE, "new.txt"), "w"), PermissionError)
refused("removing the script", lambda: os.remove(os.path.join(HERE, "data.txt")), PermissionError)
refused("dumping the graph next to the script", lambda: dtorch.dump_graph(os.path.join(HERE, "graph.dot")), PermissionError)
assert not os.path.exists(os.path.join(HERE, "graph.dot"))
refused("writing a line chart next to the script",
        lambda: dtorch.plot.line_chart(os.path.join(HERE, "loss.png"), {"loss": [1.0, 0.5]}), PermissionError)
assert not os.path.exists(os.path.join(HERE, "loss.png"))

# Nothing outside it, not even through a link placed next to the script.
refused("reading /etc/passwd", lambda: open("/etc/passwd").read(), PermissionError)
refused("reading /etc/passwd through a link", lambda: open(os.path.join(HERE, "passwd")).read(), PermissionError)
refused("listing /", lambda: os.listdir("/"), PermissionError)
refused("reading the parent directory", lambda: os.listdir(os.path.dirname(HERE)), PermissionError)

# No processes, no environment.
refused("starting a process", lambda: subprocess.run(["/bin/true"]), OSError)
assert "HOME" not in os.environ and "PATH" not in os.environ, sorted(os.environ)

print("isolated: all checks passed")
