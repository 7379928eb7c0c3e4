"""A small Llama-style decoder written with torch.nn, as one writes it for one device: RMSNorm, rotary position
embeddings, grouped-query attention with a key/value cache, a SwiGLU MLP and tied input/output embeddings.

Nothing here knows about meshes: the same module runs on torch tensors, and on distributed tensors once
dtorch.parallel.parallelize_module has distributed its parameters (llama.py does both and compares them).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    vocab_size: int = 512
    dim: int = 128
    n_layers: int = 2
    n_heads: int = 8
    n_kv_heads: int = 4
    hidden_dim: int = 344
    max_seq_len: int = 64
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @staticmethod
    def preset(name: str) -> "LlamaConfig":
        """"tiny" runs anywhere in seconds; "1b" is a ~1.1B-parameter configuration (Llama-3.2-1B's shape with a
        32,000-token vocabulary) for a GPU."""
        if name == "tiny":
            return LlamaConfig()
        if name == "1b":
            return LlamaConfig(vocab_size=32000, dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, hidden_dim=8192,
                               max_seq_len=256, rope_theta=500000.0)
        raise ValueError("unknown model size %r (tiny or 1b)" % (name,))


def rotary_tables(config: LlamaConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position's rotation angles, [max_seq_len, head_dim] each (the two halves repeat)."""
    half = config.head_dim // 2
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, half, dtype=torch.float64) / half))
    angles = torch.outer(torch.arange(config.max_seq_len, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().float(), angles.sin().float()


def apply_rotary(x, cos, sin):
    """x [batch, heads, tokens, head_dim] rotated by the angles of its positions (cos, sin: [tokens, head_dim])."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.head_dim = config.head_dim
        self.wq = nn.Linear(config.dim, config.n_heads * config.head_dim, bias=False)
        self.wk = nn.Linear(config.dim, config.n_kv_heads * config.head_dim, bias=False)
        self.wv = nn.Linear(config.dim, config.n_kv_heads * config.head_dim, bias=False)
        self.wo = nn.Linear(config.n_heads * config.head_dim, config.dim, bias=False)

    def forward(self, x, *, cos, sin, cache, pos):
        batch, tokens = x.shape[0], x.shape[1]
        q = self.wq(x).view(batch, tokens, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(batch, tokens, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(batch, tokens, -1, self.head_dim).transpose(1, 2)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        if cache is None:  # training: the whole sequence at once, no cache to fill
            keys, values = k, v
        else:
            cache_k, cache_v = cache
            cache_k[:, :, pos:pos + tokens] = k  # the cache is written in place, one step's rows
            cache_v[:, :, pos:pos + tokens] = v
            keys = cache_k[:, :, :pos + tokens]
            values = cache_v[:, :, :pos + tokens]
        out = F.scaled_dot_product_attention(q, keys, values, is_causal=tokens > 1, enable_gqa=True)
        return self.wo(out.transpose(1, 2).reshape(batch, tokens, -1))


class FeedForward(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.hidden_dim, bias=False)
        self.w2 = nn.Linear(config.hidden_dim, config.dim, bias=False)
        self.w3 = nn.Linear(config.dim, config.hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.attention = Attention(config)
        self.ffn_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.feed_forward = FeedForward(config)

    def forward(self, x, *, cos, sin, cache, pos):
        h = x + self.attention(self.attention_norm(x), cos=cos, sin=sin, cache=cache, pos=pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(TransformerBlock(config) for _ in range(config.n_layers))
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied embeddings
        cos, sin = rotary_tables(config)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def init_weights(self) -> None:
        """Every weight but the norms' drawn from N(0, 1.13 / sqrt(dim)) (0.1 at dim 128): a random model whose greedy
        tokens vary, where PyTorch's default initialisation with tied embeddings repeats the prompt's last token."""
        std = 1.13 / self.config.dim ** 0.5
        for name, p in self.named_parameters():
            if "norm" not in name:
                nn.init.normal_(p, std=std)

    def tie_weights(self) -> None:
        """Ties the output projection to the embedding again (after its parameters were replaced)."""
        self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens, caches=None, pos: int = 0):
        """Logits [batch, tokens, vocab] of `tokens` [batch, tokens] at positions pos, pos + 1, ...; each layer's
        (keys, values) cache in `caches` receives this step's rows. Without caches (training) every layer attends
        over `tokens` alone."""
        n = tokens.shape[1]
        cos = self.rope_cos[pos:pos + n]
        sin = self.rope_sin[pos:pos + n]
        h = self.tok_embeddings(tokens)
        for layer, cache in zip(self.layers, caches if caches is not None else [None] * len(self.layers)):
            h = layer(h, cos=cos, sin=sin, cache=cache, pos=pos)
        return self.output(self.norm(h))


@torch.no_grad()  # generation needs no gradients: nothing is recorded for autograd on torch tensors
def generate(model: Llama, prompt, new_tokens: int, caches, wait=lambda t: None, around_decode=contextlib.nullcontext,
             issued=None):
    """Greedy decoding: the prompt [batch, tokens] through the model once (prefill), then one token at a time, each
    step reading and extending the caches. Returns the generated tokens (one [batch, 1] tensor a step), the last
    step's logits and the seconds of the prefill and of the decode; wait(tensor) returns once `tensor` is computed,
    and the decode runs inside the context manager around_decode() returns. When `issued` is a list, the seconds the
    decode took to issue its steps, before waiting for the last one, are appended to it (close to the decode's time
    when issuing is the bottleneck, far below it when the device is)."""
    start = time.perf_counter()
    logits = model(prompt, caches, 0)
    token = logits[:, -1].argmax(-1, keepdim=True)
    wait(token)
    prefill = time.perf_counter() - start
    pos = prompt.shape[1]
    generated = [token]
    with around_decode():
        for _ in range(new_tokens - 1):
            logits = model(token, caches, pos)
            token = logits[:, -1].argmax(-1, keepdim=True)
            generated.append(token)
            pos += 1
        if issued is not None:
            issued.append(time.perf_counter() - start - prefill)
        wait(token)
    return generated, logits, prefill, time.perf_counter() - start - prefill
