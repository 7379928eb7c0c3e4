"""The client's cost of one operator on distributed tensors, against the same operator on the `torch` module's plain
tensors in the same run, and the tiny Llama's decode tokens/s on one device against the same model on plain tensors.

    ./dtorch run --devices cpu:4 benchmarks/python/bench_client_path.py [--ops 5000] [--warmup 20] [--rounds 9] [--repeat 12]

Per operator: a round of a case issues OPS operators (the result dropped, as model code drops it), timing the issuing
alone (the workers drain the queue after it, untimed). Every case first runs WARMUP rounds, all cases in turn, so that
GraalPy's JIT has compiled them all; then ROUNDS rounds of every case, the cases in turn, so that a change in the
machine's load falls on all of them alike. The median round's cost per operator is printed. The operands are small (8 x 8 float32), so the client's path, not the
kernels, is what is measured: `a + b` (the Python operator), `torch.mm(a, b)` and `F.linear(x, w)` (torch's functions,
which hand distributed tensors to dtorch), on a 1-device mesh (replicated) and on the 4 devices (`a + b` with both
`[S(0)]`, `mm` of `[S(0)]` by `[R]`, `linear` of `[R]` by a `[S(0)]` weight: placements that fit, no communication).

Decode: examples/python/llama_model.py's tiny model, parallelized as examples/python/llama.py parallelizes it, on a
1-device mesh, and the same weights on plain tensors; REPEAT generations each (GraalPy's JIT warms up over them), the
best decode of each printed. Both must generate the same tokens.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import dtorch
from dtorch import Replicate, Shard
from dtorch.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
from llama_model import Llama, LlamaConfig, generate  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--ops", type=int, default=5000, help="operators per round")
parser.add_argument("--warmup", type=int, default=20, help="warm-up rounds of every case")
parser.add_argument("--rounds", type=int, default=9, help="measured rounds of every case")
parser.add_argument("--repeat", type=int, default=12, help="decode generations per model")
parser.add_argument("--only", default=None, help="run only the cases whose name contains this")
args = parser.parse_args()


def round_us(fn, sync):
    start = time.perf_counter_ns()
    for _ in range(args.ops):
        fn()
    elapsed = time.perf_counter_ns() - start
    sync()
    return elapsed / args.ops / 1000.0


def cases():
    one = dtorch.init_device_mesh(dtorch.device_type(), (1,))
    four = dtorch.init_device_mesh(dtorch.device_type(), (dtorch.device_count(),))
    torch.manual_seed(0)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    r1 = [Replicate()]
    da1, db1 = dtorch.distribute_tensor(a, one, r1), dtorch.distribute_tensor(b, one, r1)
    dx1, dw1 = dtorch.distribute_tensor(x, one, r1), dtorch.distribute_tensor(w, one, r1)
    da4, db4 = dtorch.distribute_tensor(a, four, [Shard(0)]), dtorch.distribute_tensor(b, four, [Shard(0)])
    dbr4 = dtorch.distribute_tensor(b, four, [Replicate()])
    dx4, dw4 = dtorch.distribute_tensor(x, four, [Replicate()]), dtorch.distribute_tensor(w, four, [Shard(0)])
    # A decode step's shape operators: a slice whose end moves every step (the KV cache's filled part), a one-position
    # write into a cache, and a move that moves nothing (the parallel plan's on one device; the baseline is detach, the
    # plain tensor's no-op). The 4-device tensors are sharded on the dimension the index leaves alone.
    cache = torch.zeros(1, 4, 16, 8)
    dc1 = dtorch.distribute_tensor(cache, one, r1)
    dc4 = dtorch.distribute_tensor(cache, four, [Shard(1)])
    row = torch.ones(1, 4, 8)
    dr1, dr4 = dtorch.distribute_tensor(row, one, r1), dtorch.distribute_tensor(row, four, [Shard(1)])
    ds1 = dtorch.distribute_tensor(a, one, [Shard(0)])
    step = [0]

    def ends(t):
        step[0] = (step[0] + 1) % 16
        return t[:, :, :step[0] + 1]

    def write(t, v):
        step[0] = (step[0] + 1) % 16
        t[:, :, step[0]] = v

    return [
        ("a + b", lambda: a + b, lambda: da1 + db1, lambda: da4 + db4),
        ("t[:, :, :p]", lambda: ends(cache), lambda: ends(dc1), lambda: ends(dc4)),
        ("t[:, :, p] = v", lambda: write(cache, row), lambda: write(dc1, dr1), lambda: write(dc4, dr4)),
        ("redistribute S(0)->R", lambda: a.detach(), lambda: ds1.redistribute(one, r1), lambda: da4.redistribute(four, [Shard(0)])),
        ("torch.mm(a, b)", lambda: torch.mm(a, b), lambda: torch.mm(da1, db1), lambda: torch.mm(da4, dbr4)),
        ("F.linear(x, w)", lambda: F.linear(x, w), lambda: F.linear(dx1, dw1), lambda: F.linear(dx4, dw4)),
    ]


def operators():
    n = dtorch.device_count()
    chosen = [c for c in cases() if not args.only or args.only in c[0]]
    timed = [(name, i, fn, (lambda: None) if i == 0 else dtorch.sync) for name, *fns in chosen for i, fn in enumerate(fns)]
    for _ in range(args.warmup):
        for _, _, fn, sync in timed:
            round_us(fn, sync)
    costs = {(name, i): [] for name, i, _, _ in timed}
    for _ in range(args.rounds):
        for name, i, fn, sync in timed:
            costs[(name, i)].append(round_us(fn, sync))
    print("per operator, us (median of %d rounds of %d after %d warm-up rounds): torch module | dtorch 1 device (ratio) "
          "| dtorch %d devices (ratio)" % (args.rounds, args.ops, args.warmup, n))
    for name, *_ in chosen:
        base, one, many = (statistics.median(costs[(name, i)]) for i in range(3))
        print("  %-16s %8.2f | %8.2f (%.2f) | %8.2f (%.2f)" % (name, base, one, base / one, many, base / many))
        print("RESULT op %s torch=%.3f one=%.3f all=%.3f" % (name.replace(" ", ""), base, one, many))


def decode():
    config = LlamaConfig.preset("tiny")
    mesh = dtorch.init_device_mesh(dtorch.device_type(), (1,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    reference = Llama(config)
    reference.init_weights()
    torch.manual_seed(0)
    model = Llama(config)
    model.init_weights()
    layer_plan = {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward.w3": ColwiseParallel(),
    }
    plan = {"tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())}
    plan.update({"layers.*." + name: style for name, style in layer_plan.items()})
    parallelize_module(model, mesh, plan)
    dtorch.distribute_module(model, mesh)
    model.tie_weights()
    prompt = torch.randint(0, config.vocab_size, (1, 8))
    shape = (1, config.n_kv_heads, config.max_seq_len, config.head_dim)

    def run(model, zeros, wait):
        best, tokens = 0.0, None
        for _ in range(args.repeat):
            caches = [(zeros(shape), zeros(shape)) for _ in range(config.n_layers)]
            generated, _, _, seconds = generate(model, prompt, 32, caches, wait)
            best = max(best, 31 / seconds)
            tokens = [t.tolist() if isinstance(t, torch.Tensor) else t.to_torch().tolist() for t in generated]
        return best, tokens

    base, tokens_one = run(reference, lambda s: torch.zeros(*s), lambda t: t.tolist())
    ours, tokens_dt = run(model, lambda s: dtorch.zeros(*s, device_mesh=mesh, placements=[Shard(1)]), lambda t: t.to_torch())
    assert tokens_dt == tokens_one, "generated tokens differ:\n  dtorch %s\n  torch %s" % (tokens_dt, tokens_one)
    print("tiny decode tokens/s (best of %d): torch module %.1f | dtorch 1 device %.1f (ratio %.2f)"
          % (args.repeat, base, ours, ours / base))
    print("RESULT decode torch=%.2f dtorch=%.2f" % (base, ours))


if args.only != "decode":
    operators()
if args.only is None or args.only == "decode":
    decode()
