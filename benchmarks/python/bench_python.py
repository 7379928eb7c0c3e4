"""Python-side costs of dtorch, one run; started by the Java harness (PythonBenchmark, `-Dbench.select=python`)
once per run with GraalPy's JIT and once in its interpreter (DTORCH_JIT=off), which reads the lines printed here.

Usage: ./dtorch run --devices cpu:1 bench_python.py ROUNDS WARMUP_ROUNDS OPS AWAITS WARMUP_AWAITS TORCH_BATCHES TORCH_WARMUP

Prints, each value in nanoseconds:
  SAMPLES enqueue ...  the mean enqueue cost of one operator (`y = x + x; y.close()`) per measured round of OPS
  TRACE enqueue ...    the same for every round, warm-up rounds included (how the JIT settles)
  SAMPLES await ...    `await` wake-up: the value set in the JVM to the coroutine running again
  SAMPLES asyncio ...  the baseline: another Python thread's `call_soon_threadsafe` to the coroutine running again
  SAMPLES torch_add .. the `torch` module: one `torch.add(a, b)` of two (1,) tensors, the mean of each batch of 10
                       calls timed together, TORCH_BATCHES batches after TORCH_WARMUP unrecorded ones
"""

import asyncio
import queue
import sys
import threading
import time

import dtorch
from dtorch import _bridge

ROUNDS, WARMUP_ROUNDS, OPS, AWAITS, WARMUP_AWAITS, TORCH_BATCHES, TORCH_WARMUP = (int(a) for a in sys.argv[1:8])
TORCH_BATCH = 10
HELPER_TIMEOUT_S = 60


def enqueue_cost(bridge):
    """Per-round mean cost of issuing one operator; the client never waits for the workers inside a round."""
    x = dtorch.ones(1)
    per_op = []
    for _ in range(WARMUP_ROUNDS + ROUNDS):
        start = bridge.nanoTime()
        for _ in range(OPS):
            y = x + x
            y.close()
        elapsed = bridge.nanoTime() - start
        dtorch.sync()
        per_op.append(elapsed // OPS)
    return per_op


def await_wakeup(bridge):
    """From the runtime completing a future (its Java clock) to the awaiting coroutine running again."""
    x = dtorch.ones(1)
    latencies = []

    async def main():
        for i in range(WARMUP_AWAITS + AWAITS):
            f = (x + i).to_torch_async()
            await f
            resumed = bridge.nanoTime()
            if i >= WARMUP_AWAITS:
                latencies.append(resumed - f._java.completedAtNanos())

    asyncio.run(main())
    return latencies


def asyncio_floor(bridge):
    """The same wake-up without dtorch: a helper thread resolves a plain asyncio future with call_soon_threadsafe."""
    requests = queue.Queue()
    latencies = []

    def helper():
        while True:
            item = requests.get(timeout=HELPER_TIMEOUT_S)
            if item is None:
                return
            loop, future, stamp = item
            stamp[0] = bridge.nanoTime()
            loop.call_soon_threadsafe(future.set_result, None)

    thread = threading.Thread(target=helper, daemon=True)
    thread.start()

    async def main():
        loop = asyncio.get_running_loop()
        for i in range(WARMUP_AWAITS + AWAITS):
            future = loop.create_future()
            stamp = [0]
            requests.put((loop, future, stamp))
            await future  # like `await f` above: no timeout on the measured path; the Java harness bounds the process
            resumed = bridge.nanoTime()
            if i >= WARMUP_AWAITS:
                latencies.append(resumed - stamp[0])

    try:
        asyncio.run(main())
    finally:
        requests.put(None)
        thread.join(HELPER_TIMEOUT_S)
    return latencies


def torch_add_cost():
    """Per call of torch.add on (1,) tensors: Python's argument classification, the cached overload, the dispatcher in
    the JVM, the result's handle. Ten calls per clock reading keep the clock's own cost out of the figure."""
    import torch
    a = torch.ones(1)
    b = torch.ones(1)
    add = torch.add
    clock = time.perf_counter_ns
    samples = []
    for i in range(TORCH_WARMUP + TORCH_BATCHES):
        start = clock()
        add(a, b)
        add(a, b)
        add(a, b)
        add(a, b)
        add(a, b)
        add(a, b)
        add(a, b)
        add(a, b)
        add(a, b)
        add(a, b)
        elapsed = clock() - start
        if i >= TORCH_WARMUP:
            samples.append(elapsed // TORCH_BATCH)
    assert add(a, b).tolist() == [2.0]
    return samples


def line(kind, name, values):
    print("%s %s %s" % (kind, name, " ".join(str(int(v)) for v in values)), flush=True)


bridge = _bridge.bridge()
trace = enqueue_cost(bridge)
line("SAMPLES", "enqueue", trace[WARMUP_ROUNDS:])
line("TRACE", "enqueue", trace)
line("SAMPLES", "await", await_wakeup(bridge))
line("SAMPLES", "asyncio", asyncio_floor(bridge))
line("SAMPLES", "torch_add", torch_add_cost())
