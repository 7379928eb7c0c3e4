"""Sequence-parallel attention on distributed tensors: strategy="ulysses" turns sequence shards into
head shards and back, and equals torch's attention on one device."""

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard
from _testing import raises, run


def qkv(batch=2, heads=4, seq=8, dim=6, kv_seq=None):
    torch.manual_seed(11)
    return torch.randn(batch, heads, seq, dim), torch.randn(batch, heads, kv_seq or seq, dim), \
        torch.randn(batch, heads, kv_seq or seq, dim)


def test_ulysses_attention_equals_single_device_attention_and_keeps_the_sequence_shards():
    cases = [((2,), [Shard(2)]), ((4,), [Shard(2)]), ((2, 2), [Shard(2), Shard(2)]), ((2, 2), [Shard(0), Shard(2)]),
             ((2, 2), [Shard(2), Replicate()])]
    for shape, placements in cases:
        mesh = dtorch.init_device_mesh("cpu", shape)
        q, k, v = qkv()
        dq, dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=placements) for t in (q, k, v))
        for causal in (False, True):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            got = dtorch.nn.functional.scaled_dot_product_attention(dq, dk, dv, is_causal=causal, strategy="ulysses")
            assert got.placements == tuple(placements), (shape, placements, got.placements)
            assert torch.allclose(got.to_torch(), out, atol=1e-5, rtol=1e-4), (shape, placements, causal)


def test_ulysses_attention_takes_a_longer_key_sequence_and_a_scale():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    q, k, v = qkv(seq=4, kv_seq=10)
    dq, dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=[Shard(2)]) for t in (q, k, v))
    got = dtorch.nn.functional.scaled_dot_product_attention(dq, dk, dv, scale=0.5, strategy="ulysses")
    assert torch.allclose(got.to_torch(), F.scaled_dot_product_attention(q, k, v, scale=0.5), atol=1e-5, rtol=1e-4)


def test_ulysses_attention_without_a_sequence_shard_is_the_plain_operator():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    q, k, v = qkv()
    dq, dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=[Shard(0)]) for t in (q, k, v))
    got = dtorch.nn.functional.scaled_dot_product_attention(dq, dk, dv, strategy="ulysses")
    assert got.placements == (Shard(0),)
    assert torch.allclose(got.to_torch(), F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-4)


def test_ulysses_attention_refuses_what_it_cannot_split_before_moving_anything():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    q, k, v = qkv(heads=6)
    dq, dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=[Shard(2)]) for t in (q, k, v))
    sdpa = dtorch.nn.functional.scaled_dot_product_attention
    # 6 heads over 4 devices split 2, 2, 1, 1 (query, key and value alike); grouped heads need whole groups per device.
    assert torch.allclose(sdpa(dq, dk, dv, strategy="ulysses").to_torch(), F.scaled_dot_product_attention(q, k, v),
                          atol=1e-5, rtol=1e-4)
    dk2, dv2 = (dtorch.Tensor(t[:, :2], device_mesh=mesh, placements=[Shard(2)]) for t in (k, v))
    raises(ValueError, lambda: sdpa(dq, dk2, dv2, enable_gqa=True, strategy="ulysses"),
           contains="the query's 6 heads do not divide over the 4")
    other = dtorch.Tensor(k, device_mesh=mesh, placements=[Replicate()])
    raises(ValueError, lambda: sdpa(dq, other, dv, strategy="ulysses"), contains="key must have the query's")
    raises(ValueError, lambda: sdpa(dq, dk, dv, strategy="zigzag"), contains="strategy must be")


if __name__ == "__main__":
    run(globals())
