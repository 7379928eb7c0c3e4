"""PyTorch eager's side of DirectCallsBenchmark: the host time of one call of a decode step's frequent operators on the
Llama example's tiny shapes, from Python, each result dropped at once, rounds of each in turn, the median of the rounds
(on CUDA the calls only launch; the device is synchronized at the end of each round).

    python3 benchmarks/python/bench_calls_torch.py [cpu|cuda] [calls per round] [rounds]
"""
import sys
import time

import torch
import torch.nn.functional as F


def main():
    device = "cuda:0" if len(sys.argv) > 1 and sys.argv[1] == "cuda" else "cpu"
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    x = torch.randn(1, 1, 128, device=device)
    w = torch.randn(384, 128, device=device)
    q = torch.randn(1, 8, 1, 16, device=device)
    k = torch.randn(1, 4, 20, 16, device=device)
    norm = torch.randn(128, device=device)
    cases = [("linear", lambda: F.linear(x, w)), ("silu", lambda: F.silu(x)), ("transpose", lambda: q.transpose(1, 2)),
             ("view", lambda: x.view(1, 1, 8, 16)), ("slice", lambda: q[:, :, :, 0:8]),
             ("rms_norm", lambda: F.rms_norm(x, (128,), norm, 1e-5)),
             ("scaled_dot_product_attention", lambda: F.scaled_dot_product_attention(q, k, k, enable_gqa=True))]
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    print("| operator (%s, torch %s) | us per call |" % (device, torch.__version__))
    print("|---|---|")
    with torch.no_grad():
        for name, call in cases:
            times = []
            for r in range(rounds + 1):
                start = time.perf_counter()
                for _ in range(calls):
                    call()
                sync()
                times.append((time.perf_counter() - start) / calls * 1e6)
            print("| %s | %.2f |" % (name, sorted(times[1:])[rounds // 2]))


if __name__ == "__main__":
    main()
