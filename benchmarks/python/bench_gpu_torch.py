"""PyTorch's side of the GPU benchmark (GpuBenchmark.java runs it in the same call and compares).

Prints one JSON object: each figure measured with the machine's own PyTorch on cuda:0, the same operations,
sizes and iteration counts as the Java side. Usage: python3 bench_gpu_torch.py [--quick]
"""
import json
import sys
import time

import torch


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


def main():
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
    del a, b

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
    del xs

    gib = (64 if quick else 1024) * 1024 * 1024
    host = torch.empty(gib, dtype=torch.uint8).pin_memory()
    device = torch.empty(gib, dtype=torch.uint8, device=dev)
    for _ in range(2):
        device.copy_(host, non_blocking=True)
    out["h2d_gbps"] = gib / best_of(3, lambda: device.copy_(host, non_blocking=True), 5) / 1e9
    out["d2h_gbps"] = gib / best_of(3, lambda: host.copy_(device, non_blocking=True), 5) / 1e9
    print(json.dumps(out))


if __name__ == "__main__":
    main()
