"""Python-side costs of dtorch, run by benchmarks/python/run.sh with the JIT on and off:
the enqueue cost of one operator (the client never waits for the workers), and the wake-up latency of `await`
(from the value arriving in the JVM to the coroutine running again), p50/p99."""

import asyncio
import sys
import time

import dtorch
from dtorch import _bridge

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
OPS = 20_000
WARMUP_ROUNDS = 30  # the JIT needs several hundred thousand calls to compile the Python -> Java call path
AWAITS = 1000
WARMUP_AWAITS = 3000


def percentile(values, p):
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, int(round(p / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[index]


def enqueue_cost():
    x = dtorch.ones(1)
    per_op = []
    for round_ in range(ROUNDS + WARMUP_ROUNDS):
        start = time.perf_counter_ns()
        for _ in range(OPS):
            y = x + x
            y.close()
        elapsed = time.perf_counter_ns() - start
        dtorch.sync()
        if round_ >= WARMUP_ROUNDS:
            per_op.append(elapsed / OPS / 1000.0)
    return per_op


def await_wakeup():
    bridge = _bridge.bridge()
    x = dtorch.ones(1)
    latencies = []

    async def main():
        for i in range(AWAITS + WARMUP_AWAITS):
            f = (x + i).to_torch_async()
            await f
            resumed = bridge.nanoTime()
            if i >= WARMUP_AWAITS:
                latencies.append((resumed - f._java.completedAtNanos()) / 1000.0)

    asyncio.run(main())
    return latencies


enqueue = enqueue_cost()
wakeup = await_wakeup()
print("RESULT enqueue_us p50=%.2f p99=%.2f" % (percentile(enqueue, 50), percentile(enqueue, 99)))
print("RESULT await_wakeup_us p50=%.1f p99=%.1f" % (percentile(wakeup, 50), percentile(wakeup, 99)))
