"""A Llama-style decoder generating greedily with a key/value cache, tensor- and sequence-parallel on a 4-device mesh,
checked against the same model on one device with the same weights.

    ./dtorch run examples/python/llama.py                                   # 4 CPU devices in threads
    ./dtorch run --per-device-process examples/python/llama.py              # 4 worker processes
    ./dtorch run --devices cuda:4 --same-device examples/python/llama.py    # 4 ranks on one GPU (the -Pgpu build)
    ./dtorch run --devices cuda:1 examples/python/llama.py --size 1b        # ~1.1B parameters on one GPU

The example writes random weights to a safetensors file, loads them twice: whole, into the one-device model (plain
torch tensors), and sharded, each device reading only its own shard's bytes, into the model that
dtorch.parallel.parallelize_module has parallelized (Megatron-style tensor parallel attention and MLP, sequence
parallel norms). Both generate the same tokens; the last logits agree to 1e-4. It prints OK, and tokens per second.
"""

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile

import torch

import dtorch
from dtorch import Replicate, Shard
from dtorch.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_model import Llama, LlamaConfig, generate  # noqa: E402

parser = argparse.ArgumentParser(description="Llama-style greedy generation, tensor parallel, against one device")
parser.add_argument("--size", choices=("tiny", "1b"), default="tiny", help="model size (default: tiny)")
parser.add_argument("--batch", type=int, default=1)
parser.add_argument("--prompt-len", type=int, default=8)
parser.add_argument("--new-tokens", type=int, default=32)
parser.add_argument("--tp", type=int, default=None, help="tensor-parallel degree (default: every device)")
parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="the mesh's device type (default: the runtime's, set by ./dtorch run --devices)")
parser.add_argument("--weights", default=None, help="the safetensors file to write and load (default: a temporary one)")
parser.add_argument("--no-reference", action="store_true", help="skip the one-device model (timing runs)")
parser.add_argument("--repeat", type=int, default=1, help="generate this many times, timing the last (warm) run")
parser.add_argument("--profile", action="store_true", help="print where the parallel model's decode spends its time")
args = parser.parse_args()

config = LlamaConfig.preset(args.size)
device = args.device or dtorch.device_type()
tp = args.tp or dtorch.device_count()
mesh = dtorch.init_device_mesh(device, (tp,), mesh_dim_names=("tp",))
print("model: %s, %d layers, dim %d, %d heads (%d key/value), vocab %d; mesh %s"
      % (args.size, config.n_layers, config.dim, config.n_heads, config.n_kv_heads, config.vocab_size, mesh))

# Random weights, written once to a safetensors file (the tied output projection is the embedding: saved once).
torch.manual_seed(0)
reference = Llama(config)
reference.init_weights()
# The file goes once both models have read it, unless --weights names one to keep.
scratch = None if args.weights is not None else tempfile.mkdtemp(prefix="dtorch-llama-")
weights = args.weights or os.path.join(scratch, "model.safetensors")
prompt = torch.randint(0, config.vocab_size, (args.batch, args.prompt_len))
assert args.prompt_len + args.new_tokens <= config.max_seq_len, "prompt and new tokens exceed max_seq_len"
state = {k: v for k, v in reference.state_dict().items() if k != "output.weight"}
# The metadata carries the configuration and the prompt, so that another program (benchmarks/python/bench_llama_torch.py,
# PyTorch on a GPU) can run the same model on the same tokens.
metadata = {"format": "pt", "config": json.dumps(dataclasses.asdict(config)), "prompt": json.dumps(prompt.tolist())}
dtorch.safetensors.save_file(state, weights, metadata=metadata)
print("weights: %s (%.1f MB)" % (weights, os.path.getsize(weights) / 1e6))

# The parallel model: the same code, its parameters distributed by the plan, then filled from the file shard by shard.
model = Llama(config)
layer_plan = {
    "attention_norm": SequenceParallel(),
    "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "attention.wq": ColwiseParallel(),
    "attention.wk": ColwiseParallel(),
    "attention.wv": ColwiseParallel(),
    "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
    "ffn_norm": SequenceParallel(),
    "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "feed_forward.w1": ColwiseParallel(),
    "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    "feed_forward.w3": ColwiseParallel(),
}
plan = {"tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())}
plan.update({"layers.*." + name: style for name, style in layer_plan.items()})
parallelize_module(model, mesh, plan)
dtorch.distribute_module(model, mesh)  # what the plan leaves (the rotary tables) is replicated
layouts = dtorch.parallel.parameter_layouts(model)
loaded = dtorch.load_state_dict(weights, layouts, strict=False)
assert loaded.missing_keys == ["output.weight"] and not loaded.unexpected_keys, (loaded.missing_keys, loaded.unexpected_keys)
model.load_state_dict(loaded, strict=False, assign=True)
model.tie_weights()
print("tok_embeddings.weight:", model.tok_embeddings.weight.placements, " layers.0.attention.wq.weight:",
      model.layers[0].attention.wq.weight.placements)


def caches_for(zeros):
    shape = (args.batch, config.n_kv_heads, config.max_seq_len, config.head_dim)
    return [(zeros(shape), zeros(shape)) for _ in range(config.n_layers)]


def run(name, model, zeros, wait):
    """Generates (args.repeat times, each with fresh caches); prints the last run's prefill tokens/s (the prompt in one
    step) and decode tokens/s (one token a step)."""
    issued, decodes = [], []
    for _ in range(args.repeat):
        generated, logits, prefill, decode = generate(model, prompt, args.new_tokens, caches_for(zeros), wait, issued=issued)
        decodes.append(decode)
    tokens = [t.tolist() if isinstance(t, torch.Tensor) else t.to_torch().tolist() for t in generated]
    last = (logits if isinstance(logits, torch.Tensor) else logits.to_torch()).to("cpu")
    print("%s: prefill %.1f tokens/s, decode %.1f tokens/s (its steps issued in %.0f%% of its time)" % (
        name, args.batch * args.prompt_len / prefill, args.batch * (args.new_tokens - 1) / max(decode, 1e-9),
        100 * issued[-1] / max(decode, 1e-9)))
    if args.repeat > 1:
        rates = [args.batch * (args.new_tokens - 1) / max(d, 1e-9) for d in decodes]
        print("  decode tokens/s of each run: " + ", ".join("%.1f" % r for r in rates))
        later = sorted(rates[len(rates) // 2:])  # the median of the later half: steadier than the last run alone
        print("  decode tokens/s, median of the last %d runs: %.1f" % (len(later), later[len(later) // 2]))
    return [[row[0] for row in step] for step in tokens], last


tokens_tp, logits_tp = run("tensor parallel on %d devices" % tp, model,
                           lambda s: dtorch.zeros(*s, device_mesh=mesh, placements=[Shard(1)]), wait=lambda t: t.to_torch())
if args.profile:
    # One more generation, its decode under the profiler (whose events cost time of their own, so the timed runs above
    # ran without it). Per decoded token: the client's enqueueing, the controller's dispatch, the devices' kernels
    # and collectives (summed over devices: with several devices on few cores they overlap or queue).
    prof = dtorch.profiler.profile()
    generate(model, prompt, args.new_tokens, caches_for(lambda s: dtorch.zeros(*s, device_mesh=mesh, placements=[Shard(1)])),
             lambda t: t.to_torch(), lambda: prof)
    totals = {}
    for row in prof.key_averages():
        totals[row.category] = totals.get(row.category, 0.0) + row.cpu_time_total
    per_token = args.batch * (args.new_tokens - 1)
    print("decode, per token: " + ", ".join("%s %.0f us" % (category, total / per_token)
                                             for category, total in sorted(totals.items())))
    print(prof.key_averages().table(row_limit=30))
print("generated:", [step[0] for step in tokens_tp])
if not args.no_reference:
    reference_state = dtorch.safetensors.load_file(weights)
if scratch is not None:
    shutil.rmtree(scratch, ignore_errors=True)
if not args.no_reference:
    reference.load_state_dict(reference_state, strict=False)
    reference.tie_weights()
    tokens_one, logits_one = run("one device (torch)", reference, lambda s: torch.zeros(*s), wait=lambda t: t.tolist())
    assert tokens_tp == tokens_one, "generated tokens differ:\n  parallel %s\n  one device %s" % (tokens_tp, tokens_one)
    torch.testing.assert_close(logits_tp, logits_one, rtol=1e-4, atol=1e-4)
    print("OK: %d generated tokens equal one device's, last logits within 1e-4" % (args.new_tokens,))
