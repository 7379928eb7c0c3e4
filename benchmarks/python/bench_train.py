"""Training steps per second of the Llama-style model of examples/python/llama_model.py (AdamW, next-token cross
entropy on random tokens), as train.py trains it, against a baseline in the same run.

Under ./dtorch run it times, side by side in one process:
  - "torch": the model on plain tensors of the torch shim, on --device (the baseline);
  - "dtorch": the same model with its parameters on a mesh of one device (one rank), the batch on that mesh;
  - with --ranks N (N > 1): data parallel on N ranks (parameters replicated, the batch split over the ranks, the
    gradients' partial sums all-reduced), and the backward's time with that all-reduce against the backward of one rank
    on its 1/N of the batch, which computes the same per rank and communicates nothing.
With the machine's Python (plain PyTorch, no dtorch) it times "torch" alone, on cuda:0 when there is one: PyTorch
eager's side of the GPU comparison.

    ./dtorch run benchmarks/python/bench_train.py [--size tiny] [--steps 20] [--ranks 4]
    ./dtorch run --devices cuda:1 benchmarks/python/bench_train.py --device cuda:0
    python3 benchmarks/python/bench_train.py --device cuda:0

Prints one JSON line per implementation (steps/s, seconds per step, and with --ranks the backward's times) and, under
./dtorch, the ratio dtorch / torch. Every step ends when its loss is read (loss.item()); the time of a run ends when
its parameters are updated everywhere.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
from llama_model import Llama, LlamaConfig  # noqa: E402

try:
    import dtorch
    from dtorch import Replicate, Shard
except ImportError:  # the machine's PyTorch
    dtorch = None


def config_of(size):
    if size == "tiny":
        return LlamaConfig(vocab_size=512, dim=128, n_layers=2, n_heads=8, n_kv_heads=4, hidden_dim=344, max_seq_len=64)
    if size == "small":
        return LlamaConfig(vocab_size=4096, dim=512, n_layers=4, n_heads=8, n_kv_heads=4, hidden_dim=1376, max_seq_len=128)
    raise ValueError("unknown size %r (tiny or small)" % (size,))


def batches(config, args, count):
    torch.manual_seed(1)
    return [torch.randint(0, config.vocab_size, (args.batch, args.length + 1)) for _ in range(count)]


def synchronize(device):
    if device.startswith("cuda") and dtorch is None:
        torch.cuda.synchronize()


def run(name, model, optimizer, batches, place, device, settle):
    """Times len(batches) - warmup steps after `warmup` untimed ones; returns seconds per step."""
    def step(tokens):
        inputs, targets = place(tokens[:, :-1]), place(tokens[:, 1:])
        optimizer.zero_grad()
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.item()

    warmup = ARGS.warmup
    for tokens in batches[:warmup]:
        step(tokens)
    settle()
    start = time.perf_counter()
    for tokens in batches[warmup:]:
        step(tokens)
    settle()
    return (time.perf_counter() - start) / (len(batches) - warmup)


def backward_seconds(model, optimizer, tokens, place, settle, repeat):
    """The median time of the backward alone (forward done and waited for first), over `repeat` backwards."""
    times = []
    for _ in range(repeat):
        optimizer.zero_grad()
        inputs, targets = place(tokens[:, :-1]), place(tokens[:, 1:])
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.item()
        settle()
        start = time.perf_counter()
        loss.backward()
        settle()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def fresh_model(config, device, weights):
    model = Llama(config)
    model.load_state_dict(weights, strict=False)
    model.tie_weights()
    return model.to(device)


def distributed(config, weights, mesh):
    model = Llama(config)
    dtorch.distribute_module(model, mesh)  # every parameter replicated over the mesh
    model.load_state_dict(weights, strict=False)
    model.tie_weights()
    return model


def main():
    config = config_of(ARGS.size)
    torch.manual_seed(0)
    reference = Llama(config)
    reference.init_weights()
    weights = {k: v.detach().clone() for k, v in reference.state_dict().items() if k != "output.weight"}
    data = batches(config, ARGS, ARGS.warmup + ARGS.steps)
    device = ARGS.device
    rows = {}

    model = fresh_model(config, device, weights)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    seconds = run("torch", model, optimizer, data, lambda t: t.to(device), device, lambda: synchronize(device))
    rows["torch"] = {"seconds_per_step": seconds, "steps_per_s": 1.0 / seconds}
    if dtorch is not None:
        one = dtorch.init_device_mesh(dtorch.device_type(), (1,))
        model = distributed(config, weights, one)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        seconds = run("dtorch", model, optimizer, data, lambda t: dtorch.distribute_tensor(t, one, [Replicate()]), device,
                      dtorch.sync)
        rows["dtorch"] = {"seconds_per_step": seconds, "steps_per_s": 1.0 / seconds,
                          "vs_torch": rows["torch"]["seconds_per_step"] / seconds}
        if ARGS.ranks > 1:
            mesh = dtorch.init_device_mesh(dtorch.device_type(), (ARGS.ranks,))
            model = distributed(config, weights, mesh)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            split = lambda t: dtorch.distribute_tensor(t, mesh, [Shard(0)])  # noqa: E731
            seconds = run("dtorch dp", model, optimizer, data, split, device, dtorch.sync)
            with_comm = backward_seconds(model, optimizer, data[0], split, dtorch.sync, ARGS.repeat)
            model = distributed(config, weights, one)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            part = data[0][:ARGS.batch // ARGS.ranks]
            alone = backward_seconds(model, optimizer, part, lambda t: dtorch.distribute_tensor(t, one, [Replicate()]),
                                     dtorch.sync, ARGS.repeat)
            rows["dtorch dp"] = {"ranks": ARGS.ranks, "seconds_per_step": seconds, "steps_per_s": 1.0 / seconds,
                                 "backward_with_allreduce_s": with_comm, "backward_one_rank_of_the_batch_s": alone,
                                 "backward_ratio": with_comm / alone}
    for name, row in rows.items():
        print(json.dumps(dict(implementation=name, size=ARGS.size, device=device, batch=ARGS.batch, length=ARGS.length,
                              torch=getattr(torch, "__version__", "shim"), **row)))
    if "dtorch" in rows:
        print("dtorch / torch steps per second: %.2fx" % rows["dtorch"]["vs_torch"])


parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--size", default="tiny", help="tiny or small (default tiny)")
parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
parser.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
parser.add_argument("--length", type=int, default=32, help="tokens per sequence (default 32)")
parser.add_argument("--ranks", type=int, default=1, help="also data parallel on this many ranks (default 1: off)")
parser.add_argument("--repeat", type=int, default=5, help="backwards timed for the median (default 5)")
parser.add_argument("--device", default="cuda:0" if dtorch is None and torch.cuda.is_available() else "cpu",
                    help="the torch side's device (default cuda:0 where PyTorch has one, else cpu)")
ARGS = parser.parse_args()

if __name__ == "__main__":
    main()
