"""Ring attention on distributed tensors: strategy="ring" keeps the query's sequence shards, rotates
key and value blocks over the devices that shard the sequence, and equals torch's attention on one device (float32,
atol=1e-5, rtol=1e-4)."""

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard
from dtorch.parallel import ParallelConfig
from _testing import raises, run

sdpa = dtorch.nn.functional.scaled_dot_product_attention


def qkv(batch=2, heads=2, seq=8, dim=4, kv_seq=None, value_dim=None):
    torch.manual_seed(13)
    kv_seq = kv_seq or seq
    return torch.randn(batch, heads, seq, dim), torch.randn(batch, heads, kv_seq, dim), \
        torch.randn(batch, heads, kv_seq, value_dim or dim)


def check(mesh, placements, causal, key_placements=None, scale=None, strategy="ring", **shapes):
    q, k, v = qkv(**shapes)
    dq = dtorch.Tensor(q, device_mesh=mesh, placements=placements)
    dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=key_placements or placements) for t in (k, v))
    got = sdpa(dq, dk, dv, is_causal=causal, scale=scale, strategy=strategy)
    what = (mesh.shape, placements, causal, shapes)
    assert got.placements == tuple(placements), (what, got.placements)
    assert torch.allclose(got.to_torch(), F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
                          atol=1e-5, rtol=1e-4), what


def test_ring_attention_equals_single_device_attention_on_two_four_and_two_by_two_devices():
    cases = [((2,), [Shard(2)]), ((4,), [Shard(2)]), ((2, 2), [Shard(2), Shard(2)])]
    for shape, placements in cases:
        mesh = dtorch.init_device_mesh("cpu", shape)
        for causal in (False, True):
            check(mesh, placements, causal)


def test_ring_attention_takes_a_key_sequence_of_another_length_wider_values_and_a_scale():
    check(dtorch.init_device_mesh("cpu", (2,)), [Shard(2)], False, seq=4, kv_seq=10, value_dim=6)
    check(dtorch.init_device_mesh("cpu", (2, 2)), [Shard(2), Shard(2)], False, seq=8, kv_seq=12)
    check(dtorch.init_device_mesh("cpu", (4,)), [Shard(2)], True, scale=0.3)


def test_ring_attention_moves_key_and_value_to_the_querys_placements():
    check(dtorch.init_device_mesh("cpu", (2,)), [Shard(2)], True, key_placements=[Replicate()])


def test_ring_attention_on_the_ring_and_ulysses_dimensions_of_a_parallel_mesh():
    mesh = ParallelConfig(ring=2, ulysses=2).device_mesh("cpu")
    on_ring = [Replicate(), Replicate(), Shard(2), Replicate(), Replicate(), Replicate()]
    on_both = [Replicate(), Replicate(), Shard(2), Shard(2), Replicate(), Replicate()]
    for placements in (on_ring, on_both):
        check(mesh, placements, True)


def test_usp_moves_the_ulysses_shards_to_heads_and_rings_over_the_others():
    mesh = ParallelConfig(ring=2, ulysses=2).device_mesh("cpu")
    on_both = [Replicate(), Replicate(), Shard(2), Shard(2), Replicate(), Replicate()]
    for causal in (False, True):
        check(mesh, on_both, causal, strategy="usp")
    check(dtorch.init_device_mesh("cpu", (2, 2)), [Shard(2), Shard(2)], True, strategy="usp")  # the innermost is Ulysses
    check(dtorch.init_device_mesh("cpu", (2,)), [Shard(2)], True, strategy="usp")  # Ulysses alone
    check(mesh, on_both, False, strategy="usp", scale=0.5, seq=4, kv_seq=8)
    check(mesh, on_both, True, strategy="usp", seq=5)  # 5 positions over the ring's 2: blocks of 3 and 2


def test_ring_attention_without_a_sequence_shard_is_the_plain_operator():
    check(dtorch.init_device_mesh("cpu", (2,)), [Shard(1)], True)


def test_ring_attention_takes_uneven_blocks_and_causal_keys_of_another_length():
    check(dtorch.init_device_mesh("cpu", (4,)), [Shard(2)], True, seq=6)
    check(dtorch.init_device_mesh("cpu", (4,)), [Shard(2)], True, seq=8, kv_seq=4)


def test_ring_attention_refuses_what_it_cannot_take_before_moving_anything():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    q, k, v = qkv(seq=8, kv_seq=4)
    dq, dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=[Shard(2)]) for t in (q, k, v))
    raises(ValueError, lambda: sdpa(dq, dk, dv, attn_mask=dq, is_causal=True, strategy="ring"),
           contains="should not be set when is_causal=True")
    raises(ValueError, lambda: sdpa(dq, dk, dv, dropout_p=0.5, strategy="ring"), contains="takes no dropout_p")
    raises(TypeError, lambda: sdpa(dq, k, dv, strategy="ring"), contains="takes dtorch.Tensors")
    assert sdpa(dq, dk, dv, strategy="ring").placements == (Shard(2),)  # still usable


if __name__ == "__main__":
    run(globals())
