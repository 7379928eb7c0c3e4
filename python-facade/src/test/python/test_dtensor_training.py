"""The Llama example's model (a small configuration) trained a few steps with AdamW on distributed parameters, in
threads, under the example's tensor- and sequence-parallel plan on 4 devices and under data parallelism (replicated
parameters, a batch sharded over the devices): every step's loss equals the same model trained on one device with the
shim's autograd to 1e-4 relative, and every parameter ends equal to the one-device parameter. The data-parallel
backward all-gathers nothing."""

import os
import sys

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard, _tensor
from dtorch.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module
from _testing import iterations, run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "examples", "python"))
from llama_model import Llama, LlamaConfig  # noqa: E402

# One layer and two steps in every build; two layers and five steps in the slow run.
CONFIG = LlamaConfig(vocab_size=48, dim=32, n_layers=iterations(1, 2), n_heads=4, n_kv_heads=2, hidden_dim=40, max_seq_len=16)
MESH = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
STEPS = iterations(2, 5)


def tensor_parallel_plan():
    layer = {
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
    plan.update({"layers.*." + name: style for name, style in layer.items()})
    return plan


def train(model, batches, steps=STEPS):
    """AdamW steps of next-token cross entropy; the losses and the parameters after the last step."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for step in range(steps):
        tokens, targets = batches[step]
        opt.zero_grad()
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, CONFIG.vocab_size), targets.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def data():
    """One batch of random sequences, seen every step (so that the loss falls): tokens and the next tokens."""
    torch.manual_seed(11)
    seq = torch.randint(0, CONFIG.vocab_size, (4, 9))
    return [(seq[:, :-1], seq[:, 1:])] * STEPS


def reference_model():
    torch.manual_seed(0)
    model = Llama(CONFIG)
    model.init_weights()
    return model


def check(losses, want, reference, model, what):
    for step, (g, w) in enumerate(zip(losses, want)):
        assert abs(g - w) <= 1e-4 * abs(w), "%s step %d: loss %r, one device %r" % (what, step, g, w)
    params = dict(model.named_parameters())
    for name, p in reference.named_parameters():
        got = params[name].full_tensor()
        assert torch.allclose(got, p.detach(), rtol=1e-4, atol=1e-5), \
            "%s: %s differs by %s" % (what, name, (got - p.detach()).abs().max().item())


def test_llama_tensor_and_sequence_parallel_training_matches_one_device():
    batches = data()
    reference = reference_model()
    state = {k: v.detach().clone() for k, v in reference.state_dict().items() if k != "output.weight"}
    want = train(reference, batches)
    assert want[-1] < want[0], "the loss falls: %r" % (want,)

    model = Llama(CONFIG)
    parallelize_module(model, MESH, tensor_parallel_plan())
    dtorch.distribute_module(model, MESH)
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    rep = [Replicate()]
    got = train(model, [(dtorch.distribute_tensor(t, MESH, rep), dtorch.distribute_tensor(y, MESH, rep)) for t, y in batches])
    check(got, want, reference, model, "tensor parallel")


def test_llama_data_parallel_training_matches_one_device():
    batches = data()
    reference = reference_model()
    state = {k: v.detach().clone() for k, v in reference.state_dict().items() if k != "output.weight"}
    want = train(reference, batches)

    model = Llama(CONFIG)
    dtorch.distribute_module(model, MESH)  # every parameter and buffer replicated
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    batch = [Shard(0)]
    got = train(model, [(dtorch.distribute_tensor(t, MESH, batch), dtorch.distribute_tensor(y, MESH, batch)) for t, y in batches])
    check(got, want, reference, model, "data parallel")


def test_llama_data_parallel_backward_gathers_nothing():
    """The backward of a batch-sharded step runs on every device's rows: the losses' and the embedding's derivatives
    have strategies of their own, so nothing is all-gathered and only the gradients' partial sums are all-reduced."""
    tokens, targets = data()[0]
    model = Llama(CONFIG)
    dtorch.distribute_module(model, MESH)
    model.load_state_dict({k: v for k, v in reference_model().state_dict().items() if k != "output.weight"}, strict=False)
    model.tie_weights()
    batch = [Shard(0)]
    logits = model(dtorch.distribute_tensor(tokens, MESH, batch))
    loss = F.cross_entropy(logits.reshape(-1, CONFIG.vocab_size), dtorch.distribute_tensor(targets, MESH, batch).reshape(-1))
    loss.item()
    dtorch.sync()  # the counts are the workers': read them once the devices ran what came before
    gathers = _tensor._collective_count("all_gather")
    loss.backward()
    dtorch.sync()
    gathers = _tensor._collective_count("all_gather") - gathers
    assert gathers == 0, "the data-parallel backward all-gathered %d times" % gathers
    for name, p in model.named_parameters():
        assert tuple(p.grad.placements) == (Replicate(),), (name, p.grad.placements)


run(globals())
