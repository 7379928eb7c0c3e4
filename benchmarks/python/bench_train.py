"""Training steps per second of the Llama-style model of examples/python/llama_model.py (AdamW, next-token cross
entropy on random tokens), as train.py trains it, against a baseline in the same run.

Under ./dtorch run it times, side by side in one process:
  - "torch": the model on plain tensors of the torch shim, on --device (the baseline);
  - "dtorch": the same model with its parameters on a mesh of one device (one rank), the batch on that mesh;
  - with --ranks N (N > 1): data parallel on N ranks (parameters replicated, the batch split over the ranks, the
    gradients' partial sums all-reduced), and the backward's time with that all-reduce against the backward of one rank
    on its 1/N of the batch, which computes the same per rank and communicates nothing. The gradients' all-reduce
    overlaps the backward unless -Ddtorch.autograd.earlyGradReduction=false; with
    -Ddtorch.autograd.gradReduction=false (and --backward-only) the backward leaves the gradients unreduced, which
    times the backward without the gradients' communication.
With the machine's Python (plain PyTorch, no dtorch) it times "torch" alone, on cuda:0 when there is one: PyTorch
eager's side of the GPU comparison.

    ./dtorch run benchmarks/python/bench_train.py [--size tiny] [--steps 20] [--ranks 4] [--backward-only]
    ./dtorch run --devices cuda:1 benchmarks/python/bench_train.py --device cuda:0
    python3 benchmarks/python/bench_train.py --device cuda:0

Prints one JSON line per implementation (steps/s, seconds per step, and with --ranks the backward's times) and, under
./dtorch, the ratio dtorch / torch. Every case is warmed up first, then the cases are timed in turn, round by round
(the median of the rounds): the JIT's warming and the machine's load reach each alike. Every step ends when its loss
is read (loss.item()); a round ends when the parameters are updated everywhere.
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


def batches(config, count):
    torch.manual_seed(1)
    return [torch.randint(0, config.vocab_size, (ARGS.batch, ARGS.length + 1)) for _ in range(count)]


def synchronize(device):
    """Waits for the device's queued work (the torch module has torch.cuda.synchronize too)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def loss_of(model, optimizer, tokens, place):
    """The next-token loss of `tokens` after clearing the gradients (the forward of one step)."""
    inputs, targets = place(tokens[:, :-1]), place(tokens[:, 1:])
    optimizer.zero_grad()
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def stepper(model, optimizer, place):
    """One training step: forward, loss, backward, optimizer step; ends when the loss is read."""
    def step(tokens):
        loss = loss_of(model, optimizer, tokens, place)
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def seconds_per_step(step, batches, settle):
    settle()
    start = time.perf_counter()
    for tokens in batches:
        step(tokens)
    settle()
    return (time.perf_counter() - start) / len(batches)


def alternate(cases, data):
    """Warms every case up first, then times them in turn, ARGS.rounds times over the timed batches split in rounds
    (so that the JIT's warming and the machine's load changes reach every case alike); the median per case."""
    for step, settle in cases.values():
        for tokens in data[:ARGS.warmup]:
            step(tokens)
        settle()
    timed = data[ARGS.warmup:]
    per_round = max(1, len(timed) // ARGS.rounds)
    results = {name: [] for name in cases}
    for r in range(ARGS.rounds):
        chunk = timed[r * per_round:(r + 1) * per_round] or timed[:per_round]
        for name, (step, settle) in cases.items():
            results[name].append(seconds_per_step(step, chunk, settle))
    return {name: sorted(times)[len(times) // 2] for name, times in results.items()}


def backward_seconds(model, optimizer, tokens, place, settle, repeat):
    """The median time of the backward alone (forward done and waited for first), over `repeat` backwards."""
    times = []
    for _ in range(repeat):
        loss = loss_of(model, optimizer, tokens, place)
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
    data = batches(config, ARGS.warmup + ARGS.steps)
    device = ARGS.device
    rows = {}

    model = fresh_model(config, device, weights)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cases = {"torch": (stepper(model, optimizer, lambda t: t.to(device)), lambda: synchronize(device))}
    if dtorch is not None:
        one = dtorch.init_device_mesh(dtorch.device_type(), (1,))
        on_one = lambda t: dtorch.distribute_tensor(t, one, [Replicate()])  # noqa: E731
        model = distributed(config, weights, one)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        cases["dtorch"] = (stepper(model, optimizer, on_one), dtorch.sync)
        if ARGS.ranks > 1:
            mesh = dtorch.init_device_mesh(dtorch.device_type(), (ARGS.ranks,))
            split = lambda t: dtorch.distribute_tensor(t, mesh, [Shard(0)])  # noqa: E731
            dp_model = distributed(config, weights, mesh)
            dp_optimizer = torch.optim.AdamW(dp_model.parameters(), lr=1e-3)
            cases["dtorch dp"] = (stepper(dp_model, dp_optimizer, split), dtorch.sync)
    if ARGS.backward_only:
        cases = {name: case for name, case in cases.items() if name == "dtorch dp"}
        for step, settle in cases.values():  # the JIT's warm-up, and the workers' groups made
            for tokens in data[:ARGS.warmup]:
                loss_of(dp_model, dp_optimizer, tokens, split).backward()
            settle()
        seconds = {name: float("nan") for name in cases}
    else:
        seconds = alternate(cases, data)
    for name, value in seconds.items():
        rows[name] = {"seconds_per_step": value, "steps_per_s": 1.0 / value}
    if "dtorch" in rows:
        rows["dtorch"]["vs_torch"] = rows["torch"]["seconds_per_step"] / rows["dtorch"]["seconds_per_step"]
    if "dtorch dp" in rows:
        with_comm = backward_seconds(dp_model, dp_optimizer, data[0], split, dtorch.sync, ARGS.repeat)
        alone = backward_seconds(model, optimizer, data[0][:ARGS.batch // ARGS.ranks], on_one, dtorch.sync, ARGS.repeat)
        rows["dtorch dp"].update(ranks=ARGS.ranks, backward_with_allreduce_s=with_comm,
                                 backward_one_rank_of_the_batch_s=alone, backward_ratio=with_comm / alone)
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
parser.add_argument("--rounds", type=int, default=5, help="rounds the timed steps are split into, cases in turn (default 5)")
parser.add_argument("--repeat", type=int, default=5, help="backwards timed for the median (default 5)")
parser.add_argument("--backward-only", action="store_true",
                    help="with --ranks: time the data-parallel backward alone, no training steps (for "
                         "-Ddtorch.autograd.gradReduction=false, whose gradients no optimizer can take)")
parser.add_argument("--device", default="cuda:0" if dtorch is None and torch.cuda.is_available() else "cpu",
                    help="the torch side's device (default cuda:0 where PyTorch has one, else cpu)")
ARGS = parser.parse_args()

if __name__ == "__main__":
    main()
