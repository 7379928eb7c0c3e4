"""Trains the Llama-style model of llama_model.py to reverse sequences of tokens, under data x tensor parallelism on
four devices (a 2 x 2 mesh, "dp" x "tp": the batch split over "dp", the example's tensor- and sequence-parallel plan
along "tp"), and the same model on one device with the torch shim's autograd beside it, from the same weights on the
same batches. Every step prints both losses; the first --check steps must agree to 1e-4 relative.

    ./dtorch run examples/python/train.py [--steps 30] [--lr 3e-3] [--check 20]

The task: a sequence x of --length tokens, a separator, then x reversed; the loss is the next-token cross entropy of the
reversed half (the other targets are ignore_index). loss.backward() fills the gradient of every parameter on its
placements, and AdamW updates each device's shards with no communication.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard
from dtorch.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_model import Llama, LlamaConfig  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--steps", type=int, default=30, help="training steps (default 30)")
parser.add_argument("--lr", type=float, default=3e-3, help="AdamW's learning rate (default 3e-3)")
parser.add_argument("--batch", type=int, default=8, help="sequences per step, split over dp (default 8)")
parser.add_argument("--length", type=int, default=6, help="tokens to reverse (default 6)")
parser.add_argument("--check", type=int, default=20, help="steps whose losses must equal one device's (default 20)")
parser.add_argument("--layout", choices=("dp-tp", "fsdp"), default="dp-tp",
                    help="dp-tp: parameters replicated over dp; fsdp: each layer and the root fully sharded over dp "
                         "(dtorch.fully_shard) beside the tensor-parallel plan (default dp-tp)")
args = parser.parse_args()

config = LlamaConfig(vocab_size=32, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=128,
                     max_seq_len=2 * args.length + 2)
SEPARATOR = config.vocab_size - 1
IGNORE = -100

mesh = dtorch.init_device_mesh(dtorch.device_type(), (2, 2), mesh_dim_names=("dp", "tp"))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step `step`'s inputs and targets, [batch, 2 * length + 1] each, drawn from a seed of their own."""
    torch.manual_seed(1000 + step)
    x = torch.randint(0, SEPARATOR, (args.batch, args.length))
    sequence = torch.cat([x, torch.full((args.batch, 1), SEPARATOR, dtype=torch.int64), torch.flip(x, [1])], dim=1)
    inputs = sequence[:, :-1]
    targets = sequence[:, 1:].clone()
    targets[:, :args.length] = IGNORE  # only the reversed half is predicted
    return inputs, targets


def loss_of(model, inputs, targets):
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(-1, config.vocab_size), targets.reshape(-1), ignore_index=IGNORE)


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

# One device: the reference. Four devices: the same weights, laid out by the plan (replicated over "dp").
torch.manual_seed(0)
reference = Llama(config)
reference.init_weights()
weights = {k: v.detach().clone() for k, v in reference.state_dict().items() if k != "output.weight"}
model = Llama(config)
parallelize_module(model, mesh, plan)
dtorch.distribute_module(model, mesh)  # what the plan leaves (the rotary tables) is replicated
model.load_state_dict(weights, strict=False)
model.tie_weights()
if args.layout == "fsdp":  # parameters Shard(0) over "dp" beside their "tp" placements, gathered per layer
    for layer in model.layers:
        dtorch.fully_shard(layer, mesh["dp"])
    dtorch.fully_shard(model, mesh["dp"])
    print("fully sharded over dp: wq %s, embeddings %s" % (model.layers[0].attention.wq.weight.placements,
                                                          model.tok_embeddings.weight.placements))
print("model: %d layers, dim %d, vocab %d; mesh %s; wq %s, norm %s" % (
    config.n_layers, config.dim, config.vocab_size, mesh, model.layers[0].attention.wq.weight.placements,
    model.layers[0].attention_norm.weight.placements))

optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=args.lr)
layout = [Shard(0), Replicate()]  # the batch split over "dp", whole along "tp"
first = last = None
worst = 0.0
start = time.perf_counter()
for step in range(args.steps):
    inputs, targets = batch(step)
    reference_optimizer.zero_grad()
    want = loss_of(reference, inputs, targets)
    want.backward()
    reference_optimizer.step()

    optimizer.zero_grad()
    loss = loss_of(model, dtorch.distribute_tensor(inputs, mesh, layout), dtorch.distribute_tensor(targets, mesh, layout))
    loss.backward()
    optimizer.step()

    got, expected = loss.item(), want.item()
    relative = abs(got - expected) / abs(expected)
    print("step %3d  loss %.6f  one device %.6f  (relative difference %.1e)" % (step, got, expected, relative))
    if step < args.check:
        worst = max(worst, relative)
        assert relative <= 1e-4, "step %d: the loss %r differs from one device's %r" % (step, got, expected)
    first = got if first is None else first
    last = got
print("OK: %d steps of dp x tp training on %d devices, the first %d equal to one device's losses (largest relative "
      "difference %.1e); loss %.3f -> %.3f in %.1f s" % (args.steps, mesh.size(), min(args.check, args.steps), worst, first,
                                                      last, time.perf_counter() - start))
