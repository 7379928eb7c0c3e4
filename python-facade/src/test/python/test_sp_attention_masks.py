"""Sequence-parallel attention with what model code passes, in every strategy ("ring", "ulysses", "usp"), against
torch's scaled_dot_product_attention of the whole tensors on one device (float32, atol=rtol=1e-5): is_causal, boolean
[L, S] and float [B, 1, L, S] / [B, H, L, S] masks (each with a row that masks every key: torch gives zeros there), masks
given as dtorch.Tensors or as plain torch tensors, grouped-query attention (8 query heads over 2 key heads; Ulysses
repeats key heads to whole groups per device), sequences of 7 and 13 over 4 devices and of 3 over 4 (empty shards), on
meshes of 2 and 4 devices and 2x2 for usp."""

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard
from _testing import raises, run

sdpa = dtorch.nn.functional.scaled_dot_product_attention


def mask_for(kind, batch, heads, seq, kv_seq):
    """None for none or causal; a boolean [L, S] mask whose row 1 masks every key; a float [B, 1, L, S] mask; a float
    [B, H, L, S] mask whose row 0 of the last head is -inf throughout."""
    if kind == "bool":
        m = torch.rand(seq, kv_seq) > 0.4
        if seq > 1:
            m[1] = False
        return m
    if kind == "float_broadcast":
        return torch.randn(batch, 1, seq, kv_seq)
    if kind == "float":
        m = torch.randn(batch, heads, seq, kv_seq)
        m[:, heads - 1, 0] = float("-inf")
        return m
    return None


def check(strategy, mesh_shape, seq, masking="none", heads=4, kv_heads=4, kv_seq=None, mask_as="torch", scale=None):
    kv_seq = kv_seq or seq
    torch.manual_seed(seq * 131 + kv_seq * 7 + heads)
    q = torch.randn(2, heads, seq, 4)
    k, v = torch.randn(2, kv_heads, kv_seq, 4), torch.randn(2, kv_heads, kv_seq, 3)
    mask = mask_for(masking, 2, heads, seq, kv_seq)
    causal, gqa = masking == "causal", heads != kv_heads
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa)
    mesh = dtorch.init_device_mesh("cpu", mesh_shape)
    placements = [Shard(2)] * len(mesh_shape)
    dq, dk, dv = (dtorch.Tensor(t, device_mesh=mesh, placements=placements) for t in (q, k, v))
    if mask is not None and mask_as == "dtorch":
        mask = dtorch.Tensor(mask, device_mesh=mesh, placements=[Replicate()] * len(mesh_shape))
    got = sdpa(dq, dk, dv, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa, strategy=strategy)
    what = (strategy, mesh_shape, seq, kv_seq, masking, heads, kv_heads, mask_as)
    assert got.placements == tuple(placements), (what, got.placements)
    value = got.to_torch()
    assert value.shape == want.shape, (what, value.shape)
    assert torch.allclose(value, want, atol=1e-5, rtol=1e-5), (what, (value - want).abs().max())


def test_every_strategy_is_causal_by_global_position_on_uneven_and_empty_shards():
    for strategy in ("ring", "ulysses", "usp"):
        for seq in (7, 13, 3):
            check(strategy, (4,), seq, "causal")
        check(strategy, (2,), 7, "causal")
    check("ring", (4,), 6, "causal", kv_seq=9)  # a longer key sequence, top-left aligned as torch's is_causal
    check("usp", (2, 2), 13, "causal")


def test_every_strategy_takes_boolean_and_float_masks_as_torch_or_dtorch_tensors():
    for strategy in ("ring", "ulysses", "usp"):
        check(strategy, (4,), 7, "bool")
        check(strategy, (2,), 13, "float_broadcast", mask_as="dtorch")
        check(strategy, (4,), 3, "float")
    check("ring", (4,), 13, "float", mask_as="dtorch", scale=0.3)
    check("usp", (2, 2), 7, "bool", mask_as="dtorch")
    check("usp", (2, 2), 13, "float")


def test_every_strategy_attends_grouped_query_heads():
    for strategy in ("ring", "ulysses", "usp"):
        check(strategy, (4,), 8, heads=8, kv_heads=2)  # Ulysses repeats the 2 key heads to 4: one per device
        check(strategy, (2,), 7, "causal", heads=8, kv_heads=2)
        check(strategy, (4,), 13, "float", heads=8, kv_heads=2)
    check("usp", (2, 2), 7, "bool", heads=8, kv_heads=2)
    check("usp", (2, 2), 3, "causal", heads=4, kv_heads=1)


def test_a_mask_sharded_like_the_query_moves_where_each_strategy_needs_it():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    torch.manual_seed(5)
    q, m = torch.randn(1, 4, 7, 4), torch.randn(1, 4, 7, 7)
    dq = dtorch.Tensor(q, device_mesh=mesh, placements=[Shard(2)])
    dm = dtorch.Tensor(m, device_mesh=mesh, placements=[Shard(2)])
    want = F.scaled_dot_product_attention(q, q, q, attn_mask=m)
    for strategy in (None, "ring", "ulysses", "usp"):
        assert torch.allclose(sdpa(dq, dq, dq, attn_mask=dm, strategy=strategy).to_torch(), want, atol=1e-5, rtol=1e-5), strategy


def test_refusals_come_before_anything_moves():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    torch.manual_seed(7)
    q, one = torch.randn(1, 8, 6, 4), torch.randn(1, 1, 6, 4)
    dq = dtorch.Tensor(q, device_mesh=mesh, placements=[Shard(2)])
    done = dtorch.Tensor(one, device_mesh=mesh, placements=[Shard(2)])
    mask = torch.ones(6, 6, dtype=torch.bool)
    for strategy in ("ring", "ulysses", "usp"):
        raises(ValueError, lambda: sdpa(dq, dq, dq, attn_mask=mask, is_causal=True, strategy=strategy),
               contains="should not be set when is_causal=True")
        raises(ValueError, lambda: sdpa(dq, dq, dq, dropout_p=0.1, strategy=strategy), contains="dropout_p")
    raises(ValueError, lambda: sdpa(dq, dq, dq, attn_mask=torch.zeros(6, 6, dtype=torch.int64), strategy="ring"),
           contains="attn_mask must be boolean, float or the query's dtype")
    square = dtorch.init_device_mesh("cpu", (2, 2))
    heads_and_seq = [Shard(1), Shard(2)]
    sq = dtorch.Tensor(q, device_mesh=square, placements=heads_and_seq)
    sone = dtorch.Tensor(one, device_mesh=square, placements=heads_and_seq)
    raises(ValueError, lambda: sdpa(sq, sone, sone, enable_gqa=True, strategy="ring"), contains="would split a query group")
    assert sdpa(dq, done, done, enable_gqa=True, strategy="ulysses").placements == (Shard(2),)  # still usable


if __name__ == "__main__":
    run(globals())
