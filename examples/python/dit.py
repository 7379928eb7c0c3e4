"""A DiT-style diffusion transformer (adaLN-modulated blocks, self-attention over patches, an MLP) sampling a few
denoising steps with classifier-free guidance, CFG-parallel x sequence-parallel on 4 devices, checked against the same
model on one device with the same weights.

    ./dtorch run examples/python/dit.py                                   # CFG x Ulysses on 4 CPU devices in threads
    ./dtorch run examples/python/dit.py --attention ring                  # CFG x Ring
    ./dtorch run --per-device-process examples/python/dit.py              # 4 worker processes
    ./dtorch run --devices cuda:4 --same-device examples/python/dit.py    # 4 ranks on one GPU (the -Pgpu build)

The mesh is TeleFuser's: ParallelConfig(cfg=2, ulysses=2) (or ring=2). The conditional and the unconditional halves
of each step's batch go to the two halves of the "cfg" dimension; every image's patch sequence is split over the
"ulysses" (or "ring") dimension, and attention runs as Ulysses (all-to-all to head shards) or Ring (key/value blocks
passed around the ring). The model code is written for one device; only its attention function is chosen by the caller.
It prints OK when the final latent matches one device's to 1e-4.
"""

import argparse
import functools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import dtorch
from dtorch import Replicate, Shard
from dtorch.parallel import ParallelConfig


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def timestep_embedding(t, dim, max_period=10000):
    """Sinusoidal embeddings [batch, dim] of the timesteps t [batch]."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads, attention):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.attention = attention

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        out = self.attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class DiTBlock(nn.Module):
    def __init__(self, dim, heads, attention, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads, attention)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, dim))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

    def forward(self, x, c):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        return x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))


class DiT(nn.Module):
    def __init__(self, attention, channels=4, image=16, patch=2, dim=64, depth=2, heads=4, classes=10):
        super().__init__()
        self.channels, self.patch, self.grid = channels, patch, image // patch
        self.x_embedder = nn.Conv2d(channels, dim, kernel_size=patch, stride=patch)
        self.t_embedder = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.y_embedder = nn.Embedding(classes + 1, dim)  # the last class is the unconditional one
        self.pos_embed = nn.Parameter(torch.randn(1, self.grid * self.grid, dim) * 0.02)
        self.blocks = nn.ModuleList(DiTBlock(dim, heads, attention) for _ in range(depth))
        self.norm_final = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.adaLN_final = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.linear_final = nn.Linear(dim, patch * patch * channels)
        self.dim = dim

    def tokens(self, x):
        """Patches [batch, grid * grid, dim] of the latent x [batch, channels, image, image]."""
        return self.x_embedder(x).flatten(2).transpose(1, 2) + self.pos_embed

    def forward(self, tokens, t_freq, y):
        """The predicted noise of every patch [batch, grid * grid, patch * patch * channels], from the patch tokens,
        the timesteps' sinusoidal embeddings and the class labels."""
        c = self.t_embedder(t_freq) + self.y_embedder(y)
        x = tokens
        for block in self.blocks:
            x = block(x, c)
        shift, scale = self.adaLN_final(c).chunk(2, dim=1)
        return self.linear_final(modulate(self.norm_final(x), shift, scale))

    def unpatchify(self, x):
        b, p, g, ch = x.shape[0], self.patch, self.grid, self.channels
        x = x.reshape(b, g, g, p, p, ch).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(b, ch, g * p, g * p)


def sample(model, latent, labels, steps, guidance, batch_layout=lambda t: t, sequence_layout=lambda t: t):
    """Euler steps from t = 1 to 0 with classifier-free guidance: each step runs the conditional and the unconditional
    batch together and mixes their noise predictions. batch_layout() puts a tensor of that batch where the model's
    devices want it, sequence_layout() the patch tokens."""
    batch = latent.shape[0]
    null = torch.full((batch,), model.y_embedder.num_embeddings - 1, dtype=torch.int64)
    y = batch_layout(torch.cat([labels, null]))
    x = latent
    for i in range(steps):
        t = torch.full((2 * batch,), (1.0 - i / steps) * 1000.0)
        tokens = sequence_layout(model.tokens(batch_layout(torch.cat([x, x]))))
        eps = model.unpatchify(model(tokens, batch_layout(timestep_embedding(t, model.dim)), y))
        if not isinstance(eps, torch.Tensor):
            eps = eps.to_torch().to("cpu")
        conditional, unconditional = eps[:batch], eps[batch:]
        x = x - (unconditional + guidance * (conditional - unconditional)) / steps
    return x


parser = argparse.ArgumentParser(description="DiT sampling, CFG x sequence parallel, against one device")
parser.add_argument("--attention", choices=("ulysses", "ring"), default="ulysses")
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--batch", type=int, default=2)
parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="the mesh's device type (default: the runtime's, set by ./dtorch run --devices)")
args = parser.parse_args()
device = args.device or dtorch.device_type()

# Two CFG halves where the devices pair up, the rest of the degree to the attention's sequence split (1 x 1 on one device).
cfg = 2 if dtorch.device_count() % 2 == 0 else 1
config = ParallelConfig(cfg=cfg, **{args.attention: dtorch.device_count() // cfg})
mesh = config.device_mesh(device)
print("mesh:", mesh)

torch.manual_seed(0)
reference = DiT(F.scaled_dot_product_attention)
parallel = DiT(functools.partial(dtorch.nn.functional.scaled_dot_product_attention, strategy=args.attention))
parallel.load_state_dict(reference.state_dict())
dtorch.distribute_module(parallel, mesh)  # every parameter replicated

# The doubled batch split over "cfg"; the patch sequence also over the attention's dimension.
batch_placements = [Replicate()] * mesh.ndim
batch_placements[mesh.mesh_dim_names.index("cfg")] = Shard(0)
sequence_placements = list(batch_placements)
sequence_placements[mesh.mesh_dim_names.index(args.attention)] = Shard(1)


def batch_layout(t):
    return dtorch.distribute_tensor(t, mesh, batch_placements)


printed = []


def sequence_layout(tokens):
    """The patch tokens moved to their sequence shards (printed the first time)."""
    moved = tokens.redistribute(mesh, sequence_placements)
    if not printed:
        printed.append(True)
        print("patch tokens:", moved)
    return moved


latent = torch.randn(args.batch, 4, 16, 16)
labels = torch.randint(0, 10, (args.batch,))
with torch.no_grad():
    got = sample(parallel, latent, labels, args.steps, 4.0, batch_layout, sequence_layout)
    want = sample(reference, latent, labels, args.steps, 4.0)
torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
print("OK: %d steps of CFG x %s on %s match one device to 1e-4" % (args.steps, args.attention, tuple(mesh.shape)))
