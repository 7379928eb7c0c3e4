"""TensorFuture: get, wait with a timeout, readiness, the GIL released while blocked, await without polling,
gather, wait_for timeouts, cancellation, and errors."""

import asyncio
import threading
import time

import dtorch
from dtorch import Shard
from _testing import raises, run

MESH = dtorch.init_device_mesh("cpu", (4,))


def slow(rounds=6, n=768):
    """Work that keeps the workers busy for a while: a chain of matrix products."""
    a = dtorch.randn(n, n, seed=1, device_mesh=MESH, placements=[Shard(0)])
    b = dtorch.randn(n, n, seed=2, device_mesh=MESH) / n
    for _ in range(rounds):
        a = a.matmul(b) + 1
    return a.sum()


def test_get_wait_and_is_ready():
    f = dtorch.arange(5).to_torch_async()
    assert f.get().tolist() == [0, 1, 2, 3, 4]
    assert f.is_ready()
    assert f.wait(10_000).tolist() == [0, 1, 2, 3, 4]
    pending = slow().to_torch_async()
    assert not pending.is_ready(), "the client must not wait for the workers"
    e = raises(TimeoutError, pending.wait, 1)
    assert "timed out" in str(e)
    assert pending.wait(120_000).numel() == 1
    assert dtorch._GetTensorAsync(dtorch.ones(2)).get().tolist() == [1.0, 1.0]
    assert dtorch.get_tensor_async(dtorch.ones(1)).result().item() == 1.0


def test_get_releases_the_gil():
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    measured = None
    try:
        # The measurement needs get() to block for a while: lengthen the work until it does.
        rounds = 8
        for _ in range(5):
            f = slow(rounds=rounds).to_torch_async()
            time.sleep(0.05)
            before = counter[0]
            start = time.monotonic()
            f.get()
            if time.monotonic() - start >= 0.02:
                measured = counter[0] - before
                break
            rounds *= 2
    finally:
        stop.set()
        thread.join()
    assert measured is not None, "get() never blocked for 20 ms, even with %d rounds of work" % rounds
    assert measured > 1000, "another Python thread must run while get() blocks (it advanced %d)" % measured

def test_await_gather_and_other_coroutines_run_meanwhile():
    ticks = []

    async def ticker():
        for _ in range(5):
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.01)

    async def main():
        big = slow().to_torch_async()
        small = dtorch.ones(3).sum().to_torch_async()
        results = await asyncio.gather(big, small, ticker())
        return results

    big, small, _ = asyncio.run(main())
    assert small.item() == 3.0 and big.numel() == 1
    assert len(ticks) == 5, "the ticker ran while the futures were pending"


def test_wait_for_times_out_and_the_runtime_stays_healthy():
    async def main():
        f = slow(rounds=10).to_torch_async()
        try:
            await asyncio.wait_for(f, timeout=0.001)
        except (asyncio.TimeoutError, TimeoutError):
            return "timed out"
        return "finished"

    assert asyncio.run(main()) == "timed out"
    assert dtorch.ones(2).sum().to_torch().item() == 2.0


def test_cancelling_an_awaiting_task_leaves_the_runtime_healthy():
    async def main():
        task = asyncio.ensure_future(_await(slow(rounds=10).to_torch_async()))
        await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return task.cancelled()

    assert asyncio.run(main())
    dtorch.sync()
    assert (dtorch.arange(4) * 2).to_torch().tolist() == [0, 2, 4, 6]


async def _await(f):
    return await f


def test_await_of_a_ready_future_and_errors_raised_in_the_coroutine():
    async def main():
        f = dtorch.full((2,), 3.0).to_torch_async()
        f.get()
        return await f

    assert asyncio.run(main()).tolist() == [3.0, 3.0]
    seen = []
    f = dtorch.ones(2).to_torch_async()
    f.add_done_callback(lambda value, error: seen.append((value.tolist() if value else None, error)))
    f.get()
    deadline = time.time() + 5
    while not seen and time.time() < deadline:
        time.sleep(0.001)
    assert seen == [([1.0, 1.0], None)]


run(globals())
