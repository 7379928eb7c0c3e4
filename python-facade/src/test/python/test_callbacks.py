"""Done callbacks run on the runtime's callback threads, never on a device's worker: a callback may block, even on
another value the same device has yet to produce."""

import threading
import time

import dtorch
from dtorch import Shard
from _testing import run

ONE = dtorch.DeviceMesh("cpu", [0])


def slow_on_one_device(rounds=4, n=1024):
    a = dtorch.randn(n, n, seed=3, device_mesh=ONE)
    b = dtorch.randn(n, n, seed=4, device_mesh=ONE) / n
    for _ in range(rounds):
        a = a.matmul(b)
    return a.sum()


def test_a_callback_may_block_on_a_value_the_same_device_produces_later():
    first = slow_on_one_device().to_torch_async()
    second = (dtorch.ones(4, device_mesh=ONE) * 2).to_torch_async()  # queued on device 0 after the first
    seen = []
    done = threading.Event()

    def callback(value, error):
        try:
            seen.append((error, second.get().tolist()))  # blocks until device 0 has run the next operator
        finally:
            done.set()

    first.add_done_callback(callback)
    assert done.wait(50), "the callback blocked the device that was to release it"
    assert seen == [(None, [2.0, 2.0, 2.0, 2.0])], seen


def test_a_callback_that_raises_leaves_the_runtime_working():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    f = dtorch.arange(8, device_mesh=mesh, placements=[Shard(0)]).to_torch_async()
    called = threading.Event()

    def callback(value, error):
        called.set()
        raise RuntimeError("a callback that raises, on purpose")

    f.add_done_callback(callback)
    assert called.wait(30)
    assert (dtorch.arange(8, device_mesh=mesh, placements=[Shard(0)]) * 2).to_torch().tolist() == list(range(0, 16, 2))


def test_threads_still_share_the_gil_after_callbacks_entered_python():
    """After callbacks ran on the runtime's threads, the main thread still gets the GIL back from a busy thread."""
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    worker = threading.Thread(target=count)
    worker.start()
    time.sleep(0.3)  # needs the GIL back afterwards
    stop.set()
    worker.join()
    assert counter[0] > 0


run(globals())
