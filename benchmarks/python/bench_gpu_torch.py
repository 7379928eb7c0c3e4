"""PyTorch's side of the GPU benchmark (GpuBenchmark.java runs it in the same call and compares).

Prints one JSON object: each figure measured with the machine's own PyTorch on cuda:0, the same operations,
sizes and iteration counts as the Java side. Usage: python3 bench_gpu_torch.py [--quick]

With --handoff N WARMUP it runs only the CUDA IPC hand-off below, N timed iterations after WARMUP, and prints its
p50, p95 and p99 ("ipc_p50_us", "ipc_p95_us", "ipc_p99_us") and the consumer's copy ("ipc_copy_p50_us"): the
baseline of ChannelCudaBenchmark.java.

The CUDA IPC hand-off ("ipc_p50_us", "ipc_p99_us") runs a second process (torch.multiprocessing, spawn): each
iteration the producer puts the same 64 MiB CUDA tensor on a Queue, the consumer copies it into a buffer of its own,
synchronizes and acks on another Queue; an iteration is the producer's put to the ack's arrival. The consumer keeps
the last tensor until the next arrives, so torch's cache of opened handles keeps it (steady state: no re-open).
"""
import json
import math
import sys
import time

import torch
import torch.multiprocessing as mp

IPC_BYTES = 64 * 1024 * 1024


def timed(fn, iterations, sync=torch.cuda.synchronize):
    """Seconds per iteration of fn, after the device finished everything issued."""
    sync()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    sync()
    return (time.perf_counter() - start) / iterations


def best_of(repeats, fn, iterations):
    return min(timed(fn, iterations) for _ in range(repeats))


def percentile(sorted_values, p):
    """The nearest-rank p-th percentile of an ascending list."""
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[min(len(sorted_values), rank) - 1]


def ipc_consumer(tensors, acks, elements):
    """The consumer process: copies each tensor it receives into its own buffer, synchronizes, acks.

    It keeps the last tensor it received until the next arrives: torch caches the storages it opened by handle
    only while one of them lives (weak references), so dropping each one would close the handle and open it again
    at every hand-off. Kept, the steady state opens nothing, as the Java side's mapping cache does.
    """
    dev = torch.device("cuda:0")
    buffer = torch.empty(elements, dtype=torch.float32, device=dev)
    acks.put("ready")
    kept = None
    copies = []
    while True:
        lent = tensors.get()
        if lent is None:
            break
        start = time.perf_counter()
        buffer.copy_(lent)
        torch.cuda.synchronize(dev)
        copies.append(time.perf_counter() - start)
        kept = lent
        del lent
        acks.put(1)
    del kept
    steady = sorted(copies[len(copies) // 3:])
    acks.put((float(buffer.sum().item()), percentile(steady, 50)))


def ipc_handoff(warmup, iterations, write=False):
    """Seconds per hand-off of the same CUDA tensor to a spawned process, steady state (its handle is cached there).

    With write, the producer rewrites the tensor (an elementwise kernel on its stream) before each hand-off, so the
    consumer's copy has to wait for the producer's work, as in a pipeline."""
    ctx = mp.get_context("spawn")
    tensors, acks = ctx.Queue(), ctx.Queue()
    elements = IPC_BYTES // 4
    consumer = ctx.Process(target=ipc_consumer, args=(tensors, acks, elements), daemon=True)
    consumer.start()
    if acks.get(timeout=300) != "ready":
        raise RuntimeError("the IPC consumer did not start")
    value = torch.ones(elements, dtype=torch.float32, device=torch.device("cuda:0"))
    torch.cuda.synchronize()
    seconds = []
    for i in range(warmup + iterations):
        start = time.perf_counter()
        if write:
            value.add_(0)
        tensors.put(value)
        acks.get(timeout=120)
        took = time.perf_counter() - start
        if i >= warmup:
            seconds.append(took)
    tensors.put(None)
    total, copy_p50 = acks.get(timeout=120)
    consumer.join(timeout=120)
    if total != elements:
        raise RuntimeError("the IPC consumer's copy sums to %r, expected %d" % (total, elements))
    return sorted(seconds), copy_p50


def handoff_only(iterations, warmup):
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "ipc_bytes": IPC_BYTES}
    latencies, copy_p50 = ipc_handoff(warmup, iterations)
    out["ipc_copy_p50_us"] = copy_p50 * 1e6
    for p in (50, 95, 99):
        out["ipc_p%d_us" % p] = percentile(latencies, p) * 1e6
    print(json.dumps(out))


def main():
    if "--handoff" in sys.argv:
        at = sys.argv.index("--handoff")
        handoff_only(int(sys.argv[at + 1]), int(sys.argv[at + 2]))
        return
    quick = "--quick" in sys.argv
    dev = torch.device("cuda:0")
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}

    n = 2048 if quick else 8192
    a = torch.ones((n, n), dtype=torch.bfloat16, device=dev)
    b = torch.ones((n, n), dtype=torch.bfloat16, device=dev)
    for _ in range(3):
        torch.matmul(a, b)
    seconds = best_of(3, lambda: torch.matmul(a, b), 5 if quick else 20)
    out["matmul_bf16_tflops"] = 2.0 * n ** 3 / seconds / 1e12
    a = b = None  # frees the GPU memory (the timed lambdas still name them, so no del)

    x = torch.ones(1, device=dev)
    y = torch.ones(1, device=dev)
    ops = 2000 if quick else 20000
    for _ in range(2):
        timed(lambda: x.add(y), ops)
    out["add_us"] = best_of(5, lambda: x.add(y), ops) * 1e6

    elements = (16 if quick else 256) * 1024 * 1024 // 4
    xs = [torch.full((elements,), float(r + 1), device=dev) for r in range(4)]
    for _ in range(2):
        torch.stack(xs).sum(0)
    seconds = best_of(3, lambda: torch.stack(xs).sum(0), 10)
    out["stack_sum_gbps"] = 4 * elements * 4 / seconds / 1e9
    xs = None

    gib = (64 if quick else 1024) * 1024 * 1024
    host = torch.empty(gib, dtype=torch.uint8).pin_memory()
    device = torch.empty(gib, dtype=torch.uint8, device=dev)
    for _ in range(2):
        device.copy_(host, non_blocking=True)
    out["h2d_gbps"] = gib / best_of(3, lambda: device.copy_(host, non_blocking=True), 5) / 1e9
    out["d2h_gbps"] = gib / best_of(3, lambda: host.copy_(device, non_blocking=True), 5) / 1e9
    host = device = None

    latencies, copy_p50 = ipc_handoff(100 if quick else 500, 200 if quick else 1000)
    out["ipc_copy_p50_us"] = copy_p50 * 1e6
    out["ipc_bytes"] = IPC_BYTES
    out["ipc_p50_us"] = percentile(latencies, 50) * 1e6
    out["ipc_p99_us"] = percentile(latencies, 99) * 1e6
    written, _ = ipc_handoff(100 if quick else 500, 200 if quick else 1000, write=True)
    out["ipc_write_p50_us"] = percentile(written, 50) * 1e6
    out["ipc_write_p99_us"] = percentile(written, 99) * 1e6
    print(json.dumps(out))


if __name__ == "__main__":
    main()
