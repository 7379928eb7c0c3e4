"""Trains the Llama-style model of llama_model.py to reverse sequences of tokens, under data x tensor parallelism on
four devices (a 2 x 2 mesh, "dp" x "tp": the batch split over "dp", the example's tensor- and sequence-parallel plan
along "tp"), and the same model on one device with the torch shim's autograd beside it, from the same weights on the
same batches. Every step prints both losses; the first --check steps must agree to 1e-4 relative.

    ./dtorch run examples/python/train.py [--steps 30] [--lr 3e-3] [--check 20] [--layout dp-tp|fsdp]
                                          [--dtype f32|bf16] [--save DIR] [--resume DIR] [--plot loss.png]

The task: a sequence x of --length tokens, a separator, then x reversed; the loss is the next-token cross entropy of the
reversed half (the other targets are ignore_index). loss.backward() fills the gradient of every parameter on its
placements, and AdamW updates each device's shards with no communication. --layout fsdp fully shards every layer and
the root over "dp" (dtorch.fully_shard) beside the tensor-parallel plan.

--dtype bf16 trains in mixed precision, in both models alike: the parameters (and the optimizer's state) stay float32,
every module's forward sees its parameters and floating-point buffers cast to bfloat16 (the casts are recorded, so the
gradients come back to float32 on the parameters' placements), and the logits go to float32 for the loss. The sums of
the tensor-parallel layers round in another order than one device's, so the losses agree to BF16_TOLERANCE (relative)
there rather than to 1e-4.

--save DIR writes a checkpoint after the last step (dtorch.checkpoint: both models, both optimizers and the step, each
device writing its own shards); --resume DIR loads one and trains on from its step up to --steps, with the losses the
run that never stopped has.

--plot loss.png draws both loss curves (XChart, on the JVM). In 200 steps (with the defaults) the mean loss of the last
10 steps falls below LOSS_THRESHOLD = 1.7, from 3.97 at the first step (a uniform guess among the 31 tokens would score
ln 31 = 3.43; the run recorded in docs/train-loss.png ends at 1.46); with --steps 200 or more the script checks that and
exits with status 1 if it did not.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import dtorch
import torch
from dtorch import checkpoint as dcp
import torch.nn.functional as F
from dtorch import Replicate, Shard
from dtorch.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_model import Llama, LlamaConfig  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--steps", type=int, default=30, help="training steps (default 30)")
parser.add_argument("--lr", type=float, default=3e-3, help="AdamW's learning rate (default 3e-3)")
parser.add_argument("--batch", type=int, default=32, help="sequences per step, split over dp (default 32)")
parser.add_argument("--length", type=int, default=6, help="tokens to reverse (default 6)")
parser.add_argument("--check", type=int, default=20, help="steps whose losses must equal one device's (default 20)")
parser.add_argument("--layout", choices=("dp-tp", "fsdp"), default="dp-tp",
                    help="dp-tp: parameters replicated over dp; fsdp: each layer and the root fully sharded over dp "
                         "(dtorch.fully_shard) beside the tensor-parallel plan (default dp-tp)")
parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                    help="f32: float32 throughout; bf16: bfloat16 compute with float32 parameters (default f32)")
parser.add_argument("--save", metavar="DIR", help="write a checkpoint to DIR after the last step")
parser.add_argument("--resume", metavar="DIR", help="load the checkpoint in DIR and train on from its step")
parser.add_argument("--plot", metavar="PNG", help="write both loss curves to this .png file")
args = parser.parse_args()

config = LlamaConfig(vocab_size=32, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden_dim=128,
                     max_seq_len=2 * args.length + 2)
SEPARATOR = config.vocab_size - 1
IGNORE = -100
LOSS_THRESHOLD = 1.7  # the mean of the last 10 losses after 200 steps is below this
BF16_TOLERANCE = 1e-2  # --dtype bf16: the relative difference from one device's loss allowed in the first --check steps
TOLERANCE = BF16_TOLERANCE if args.dtype == "bf16" else 1e-4

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
    logits = model(inputs).to(torch.float32)
    return F.cross_entropy(logits.reshape(-1, config.vocab_size), targets.reshape(-1), ignore_index=IGNORE)


def compute_in(module, dtype):
    """Mixed precision: the forward of every submodule sees its own floating-point parameters and buffers cast to
    `dtype`, and the float32 ones are back in place after it. The casts are recorded operators, so a parameter's gradient
    is float32 and the optimizer updates float32 weights."""
    for sub in module.modules():
        def cast(owner, _args):
            kept = {}
            for table in (owner._parameters, owner._buffers):
                for name, value in table.items():
                    if value is not None and value.dtype == torch.float32:
                        kept[(id(table), name)] = (table, value)
                        table[name] = value.to(dtype)
            object.__setattr__(owner, "_full_precision", kept)

        def restore(owner, _args, _output):
            for (_, name), (table, value) in owner.__dict__.pop("_full_precision", {}).items():
                table[name] = value

        if sub._parameters or sub._buffers:
            sub.register_forward_pre_hook(cast)
            sub.register_forward_hook(restore, always_call=True)


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
if args.dtype == "bf16":
    compute_in(reference, torch.bfloat16)
    compute_in(model, torch.bfloat16)
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


def training_state() -> dict:
    """What a checkpoint holds: both models and optimizers (the tensors themselves, filled in place by a load)."""
    model_state, optimizer_state = dcp.get_state_dict(model, optimizer)
    reference_state, reference_optimizer_state = dcp.get_state_dict(reference, reference_optimizer)
    return {"model": model_state, "optimizer": optimizer_state, "reference": reference_state,
            "reference_optimizer": reference_optimizer_state, "step": 0}


begin = 0
if args.resume:
    state = dcp.load(training_state(), args.resume)
    dcp.set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    dcp.set_state_dict(reference, reference_optimizer, model_state_dict=state["reference"],
                       optim_state_dict=state["reference_optimizer"])
    begin = state["step"]
    if begin >= args.steps:
        parser.error("the checkpoint in %s is of step %d; --steps %d leaves nothing to train" % (args.resume, begin, args.steps))
    print("resumed from %s at step %d" % (args.resume, begin))

layout = [Shard(0), Replicate()]  # the batch split over "dp", whole along "tp"
first = last = None
worst = 0.0
steps, losses, reference_losses = [], [], []
start = time.perf_counter()
for step in range(begin, args.steps):
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
        assert relative <= TOLERANCE, "step %d: the loss %r differs from one device's %r by more than %g" % (
            step, got, expected, TOLERANCE)
    first = got if first is None else first
    last = got
    steps.append(step)
    losses.append(got)
    reference_losses.append(expected)
if args.plot:
    from dtorch.plot import line_chart
    distributed = "%s on %d devices" % ("dp x tp" if args.layout == "dp-tp" else "fully sharded dp x tp", mesh.size())
    line_chart(args.plot, {distributed: (steps, losses), "one device": (steps, reference_losses)},
               title="Reversing %d tokens: the Llama-style model's training loss" % args.length, xlabel="step",
               ylabel="cross entropy")
    print("wrote the loss curves to %s" % args.plot)
if args.save:
    state = training_state()
    state["step"] = args.steps
    dcp.save(state, args.save)
    print("saved a checkpoint of step %d to %s" % (args.steps, args.save))
print("OK: %d steps of %s training on %d devices, the first %d equal to one device's losses (largest relative "
      "difference %.1e); loss %.3f -> %.3f in %.1f s" % (args.steps - begin, "dp x tp" if args.layout == "dp-tp" else "fully sharded dp x tp",
                                                      mesh.size(), max(0, min(args.check, args.steps) - begin), worst, first, last,
                                                      time.perf_counter() - start))
if args.steps >= 200:
    tail = losses[-10:]
    mean = sum(tail) / len(tail)
    if mean >= LOSS_THRESHOLD:
        print("FAILED: the mean loss of the last 10 steps is %.4f, not below %s" % (mean, LOSS_THRESHOLD))
        sys.exit(1)
    print("the mean loss of the last 10 steps, %.4f, is below %s" % (mean, LOSS_THRESHOLD))
