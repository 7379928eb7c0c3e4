"""The operators one training step of bench_train.py's model issues on one rank, per phase (forward and loss, backward,
optimizer step), and the forward's and the backward's operators by name: what a GPU rank pays a client's and a worker's
share for each.

    ./dtorch run --devices cpu:1 benchmarks/python/count_train_ops.py [--size tiny] [--batch 1] [--length 4]

Counts come from dtorch.dump_graph, which writes the operators issued since its last call; the step counted is the
fourth (the first ones also make the optimizer's state). Prints one JSON line.
"""

import argparse
import collections
import json
import os
import re
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
import dtorch  # noqa: E402
from dtorch import Replicate  # noqa: E402
from llama_model import Llama  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--size", default="tiny", help="tiny or small (default tiny)")
parser.add_argument("--batch", type=int, default=1, help="sequences per step (default 1)")
parser.add_argument("--length", type=int, default=4, help="tokens per sequence (default 4)")
ARGS = parser.parse_args()

sys.argv = [sys.argv[0], "--size", ARGS.size]
from bench_train import config_of  # noqa: E402


def dumped(path):
    """The number of operators a dump holds (its header says it), and their names."""
    with open(path) as f:
        text = f.read()
    total = int(re.search(r"the (\d+) operators", text).group(1))
    names = collections.Counter(re.findall(r'^\s*op\d+ \[label="([A-Za-z0-9_.]+)#', text, re.MULTILINE))
    return total, names


def main():
    config = config_of(ARGS.size)
    torch.manual_seed(0)
    model = Llama(config)
    model.init_weights()
    mesh = dtorch.init_device_mesh(dtorch.device_type(), (1,))
    dtorch.distribute_module(model, mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    folder = tempfile.mkdtemp(prefix="dtorch-ops-")
    counts = {}

    def dump(phase, counted):
        """Ends a phase: what it issued, counted in the step that is."""
        path = os.path.join(folder, phase + ".dot")
        dtorch.dump_graph(path)
        if counted:
            counts[phase] = dumped(path)

    def step(tokens, counted):
        place = lambda t: dtorch.distribute_tensor(t, mesh, [Replicate()])  # noqa: E731
        inputs, targets = place(tokens[:, :-1]), place(tokens[:, 1:])
        optimizer.zero_grad()
        dump("inputs", False)
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        dump("forward", counted)
        loss.backward()
        dump("backward", counted)
        optimizer.step()
        dump("optimizer", counted)
        return loss.item()

    for i in range(4):
        step(torch.randint(0, config.vocab_size, (ARGS.batch, ARGS.length + 1)), counted=i == 3)
    print(json.dumps({"size": ARGS.size, "device": dtorch.device_type(),
                      "operators": {phase: total for phase, (total, _) in counts.items()},
                      "step": sum(total for total, _ in counts.values()),
                      "forward_by_name": dict(counts["forward"][1].most_common()),
                      "backward_by_name": dict(counts["backward"][1].most_common())}))


main()
