"""dtorch.distribute_module and dtorch.parallel.parallelize_module with PyTorch's parallel styles: every style, alone and
in plans (a Megatron MLP, an attention block with sequence-parallel norms, wildcard plans over layers), on 1-D meshes
of 2 and 4 devices and on 2x2, with hidden sizes that leave uneven and empty shards; each output equals the same
module's output before it was parallelized, and the placements each style documents hold on its parameters, inputs
and outputs."""

import warnings

import dtorch
import torch
import torch.nn.functional as F
from torch import nn
from dtorch import Partial, Replicate, Shard
from dtorch.parallel import (ColwiseParallel, ParallelConfig, ParallelStyle, PrepareModuleInput, PrepareModuleInputOutput,
                             PrepareModuleOutput, RowwiseParallel, SequenceParallel, parallelize_module,
                             parameter_layouts)
from _testing import iterations, raises, run

TP_MESHES = [((2,), ("tp",)), ((4,), ("tp",)), ((2, 2), ("dp", "tp"))]


def meshes():
    return [dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names) for shape, names in TP_MESHES]


def tp(mesh, placement, other=None):
    """The placements a style documents on `mesh`: `placement` along "tp", `other` (Replicate) elsewhere."""
    placements = [other or Replicate()] * mesh.ndim
    placements[mesh.mesh_dim_names.index("tp") if mesh.mesh_dim_names and "tp" in mesh.mesh_dim_names
               else mesh.ndim - 1] = placement
    return tuple(placements)


def along_tp(placements, mesh):
    """The placement along "tp" alone: the other mesh dimensions of an activation follow the operators before it
    (a strategy may shard a batch over "dp" on its own)."""
    names = mesh.mesh_dim_names
    return placements[names.index("tp") if names and "tp" in names else mesh.ndim - 1]


def assert_same(got, expected, what):
    assert isinstance(got, dtorch.Tensor), "%s: expected a dtorch.Tensor, got %r" % (what, type(got).__name__)
    value = got.full_tensor()
    assert tuple(value.shape) == tuple(expected.shape), "%s: shape %s, expected %s" % (what, value.shape, expected.shape)
    assert torch.allclose(value, expected, atol=1e-5, rtol=1e-5), \
        "%s: differs by %s" % (what, (value - expected).abs().max().item())


def placements_of(module):
    return {name: tuple(p.placements) for name, p in module.named_parameters()}


def record_inputs(module):
    """The placements of every tensor input the module's forward gets, after the styles' hooks ran."""
    seen = []

    def hook(_mod, args, kwargs):
        seen.append(([a.placements if isinstance(a, dtorch.Tensor) else type(a).__name__ for a in args],
                     {k: v.placements if isinstance(v, dtorch.Tensor) else type(v).__name__ for k, v in kwargs.items()}))
    module.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        hd = d // self.heads
        q = self.wq(x).view(b, s, self.heads, hd).transpose(1, 2)
        k = self.wk(x).view(b, s, self.heads, hd).transpose(1, 2)
        v = self.wv(x).view(b, s, self.heads, hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / hd ** 0.5)
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        return self.wo(out.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, norm=nn.LayerNorm):
        super().__init__()
        self.attention_norm = norm(dim)
        self.attention = Attention(dim, heads)
        self.ffn_norm = norm(dim)
        self.feed_forward = MLP(dim, hidden)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, vocab, dim, heads, hidden, layers):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Block(dim, heads, hidden) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def randomize(module):
    """Non-trivial norm weights and biases (ones and zeros would hide a wrong layout of them)."""
    for name, p in module.named_parameters():
        if "norm" in name:
            p.data.copy_(torch.randn(*p.shape) * 0.5 + 1.0)
    return module


BLOCK_PLAN = {
    "": PrepareModuleInputOutput(input_layouts=Replicate(), desired_input_layouts=Shard(1),
                                 output_layouts=Shard(1), desired_output_layouts=Replicate()),
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


# ---- ColwiseParallel ----

def test_colwise_linear_shards_weight_and_bias_by_rows_and_its_output_on_the_last_dimension():
    for mesh in meshes():
        for out_features in (8, 6, 3):
            torch.manual_seed(1)
            linear = nn.Linear(5, out_features)
            x = torch.randn(2, 3, 5)
            expected = linear(x)
            parallelize_module(linear, mesh, ColwiseParallel())
            assert placements_of(linear) == {"weight": tp(mesh, Shard(0)), "bias": tp(mesh, Shard(0))}, placements_of(linear)
            assert all(isinstance(p, nn.Parameter) for p in linear.parameters())
            seen = record_inputs(linear)
            got = linear(x)
            assert seen[0][0] == [tp(mesh, Replicate())], seen
            assert got.placements == tp(mesh, Shard(2)), (mesh, got.placements)
            assert_same(got, expected, "colwise %r out=%d" % (mesh, out_features))


def test_colwise_linear_takes_a_distributed_input_and_moves_its_output_to_output_layouts():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    torch.manual_seed(2)
    linear = nn.Linear(6, 6, bias=False)
    x = torch.randn(4, 6)
    expected = linear(x)
    parallelize_module(linear, mesh, ColwiseParallel(input_layouts=Shard(0), output_layouts=Replicate()))
    seen = record_inputs(linear)
    # A torch.Tensor input is the global value in input_layouts, here Shard(0): distributed so, then replicated.
    got = linear(x)
    assert seen[-1][0] == [(Replicate(),)] and got.placements == (Replicate(),)
    assert_same(got, expected, "colwise from Shard(0)")
    # A distributed input is taken in whatever layout it has and moved to the layout the style runs with.
    for placements in ([Shard(0)], [Shard(1)], [Replicate()]):
        got = linear(dtorch.distribute_tensor(x, mesh, placements))
        assert seen[-1][0] == [(Replicate(),)] and got.placements == (Replicate(),)
        assert_same(got, expected, "colwise from %r" % placements)


def test_colwise_embedding_shards_the_embedding_dimension():
    for mesh in meshes():
        for dim in (8, 3):
            torch.manual_seed(3)
            embedding = nn.Embedding(10, dim)
            tokens = torch.tensor([[1, 4, 9], [0, 4, 2]])
            expected = embedding(tokens)
            parallelize_module(embedding, mesh, ColwiseParallel())
            assert placements_of(embedding) == {"weight": tp(mesh, Shard(1))}
            got = embedding(tokens)
            assert got.placements == tp(mesh, Shard(2)), got.placements
            assert_same(got, expected, "colwise embedding %r dim=%d" % (mesh, dim))


# ---- RowwiseParallel ----

def test_rowwise_linear_shards_the_weight_by_columns_replicates_the_bias_and_reduces_the_output():
    for mesh in meshes():
        for in_features in (8, 6, 3):
            torch.manual_seed(4)
            linear = nn.Linear(in_features, 5)
            x = torch.randn(2, 3, in_features)
            expected = linear(x)
            parallelize_module(linear, mesh, RowwiseParallel())
            assert placements_of(linear) == {"weight": tp(mesh, Shard(1)), "bias": tp(mesh, Replicate())}
            seen = record_inputs(linear)
            got = linear(x)  # the global input, taken as Shard(-1)
            assert seen[0][0] == [tp(mesh, Shard(2))], seen
            assert got.placements == tp(mesh, Replicate()), got.placements
            assert_same(got, expected, "rowwise %r in=%d" % (mesh, in_features))


def test_rowwise_linear_reduce_scatters_into_a_sharded_output_layout():
    for mesh in meshes():
        torch.manual_seed(5)
        linear = nn.Linear(6, 4)
        x = torch.randn(2, 5, 6)
        expected = linear(x)
        parallelize_module(linear, mesh, RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)))
        seen = record_inputs(linear)
        got = linear(x)
        assert seen[0][0] == [tp(mesh, Shard(2))], seen
        assert got.placements == tp(mesh, Shard(1)), got.placements
        assert_same(got, expected, "rowwise to Shard(1) on %r" % mesh)


def test_rowwise_embedding_shards_rows_and_replicates_the_output():
    for mesh in meshes():
        for vocab in (12, 6, 3):
            torch.manual_seed(6)
            embedding = nn.Embedding(vocab, 4)
            tokens = torch.tensor([[0, vocab - 1, 2], [1, 1, vocab // 2]])
            expected = embedding(tokens)
            parallelize_module(embedding, mesh, RowwiseParallel())
            assert placements_of(embedding) == {"weight": tp(mesh, Shard(0))}
            seen = record_inputs(embedding)
            got = embedding(tokens)
            assert seen[0][0] == [tp(mesh, Replicate())], seen
            assert got.placements == tp(mesh, Replicate())
            assert_same(got, expected, "rowwise embedding %r vocab=%d" % (mesh, vocab))


# ---- SequenceParallel ----

def test_sequence_parallel_replicates_norm_parameters_and_shards_input_and_output_on_the_sequence():
    for mesh in meshes():
        for make_norm in (lambda: nn.LayerNorm(6), lambda: nn.RMSNorm(6, eps=1e-6)):
            for seq in (8, 5, 3):
                torch.manual_seed(7)
                norm = make_norm()
                for p in norm.parameters():
                    p.data.copy_(torch.randn(*p.shape))
                x = torch.randn(2, seq, 6)
                expected = norm(x)
                parallelize_module(norm, mesh, SequenceParallel())
                assert set(placements_of(norm).values()) == {tp(mesh, Replicate())}
                seen = record_inputs(norm)
                got = norm(x)
                assert seen[0][0] == [tp(mesh, Shard(1))], seen
                assert got.placements == tp(mesh, Shard(1)), got.placements
                what = "sequence parallel %s %r seq=%d" % (type(norm).__name__, mesh, seq)
                assert_same(got, expected, what)
                # A distributed input of another layout is moved to the sequence shards.
                got = norm(dtorch.distribute_tensor(x, mesh, [Replicate()] * mesh.ndim))
                assert seen[1][0] == [tp(mesh, Shard(1))] and got.placements == tp(mesh, Shard(1))
                assert_same(got, expected, what + " from Replicate")


def test_sequence_parallel_takes_another_sequence_dimension():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    torch.manual_seed(8)
    norm = nn.LayerNorm(4)
    x = torch.randn(7, 2, 4)
    expected = norm(x)
    parallelize_module(norm, mesh, SequenceParallel(sequence_dim=0))
    got = norm(x)
    assert got.placements == (Shard(0),)
    assert_same(got, expected, "sequence_dim=0")


# ---- PrepareModuleInput / PrepareModuleOutput ----

class Combine(nn.Module):
    def forward(self, a, b, scale=None, *, bias=None):
        out = a * 2 + b
        if bias is not None:
            out = out + bias
        return out


def test_prepare_module_input_lays_out_positional_and_keyword_inputs():
    for mesh in meshes():
        torch.manual_seed(9)
        a, b, bias = torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6)
        module = Combine()
        parallelize_module(module, mesh, PrepareModuleInput(
            input_layouts=(Shard(0), None), desired_input_layouts=(Replicate(), None),
            input_kwarg_layouts={"bias": Shard(1)}, desired_input_kwarg_layouts={"bias": Shard(0)}))
        seen = record_inputs(module)
        db = dtorch.distribute_tensor(b, mesh, tp(mesh, Shard(1)))
        got = module(a, db, bias=bias)
        args, kwargs = seen[0]
        assert args == [tp(mesh, Replicate()), tp(mesh, Shard(1))], args  # None leaves the second input as it is
        assert kwargs == {"bias": tp(mesh, Shard(0))}, kwargs
        assert_same(got, a * 2 + b + bias, "prepare input %r" % mesh)
        raises(ValueError, lambda: module(a, db, 1.0, bias=bias), contains="same length")


def test_prepare_module_output_lays_out_one_or_several_outputs():
    class Pair(nn.Module):
        def forward(self, x):
            return x * 3, x + 1

    for mesh in meshes():
        x = torch.randn(4, 5)
        module = parallelize_module(nn.Identity(), mesh, PrepareModuleOutput(output_layouts=Replicate(),
                                                                             desired_output_layouts=Shard(0)))
        got = module(x)
        assert got.placements == tp(mesh, Shard(0))
        assert_same(got, x, "prepare output")
        pair = parallelize_module(Pair(), mesh, PrepareModuleOutput(output_layouts=(Replicate(), None),
                                                                    desired_output_layouts=(Shard(1), None)))
        first, second = pair(x)
        assert first.placements == tp(mesh, Shard(1)) and isinstance(second, torch.Tensor)
        assert_same(first, x * 3, "prepare output, first of two")
        raises(ValueError, lambda: parallelize_module(Pair(), mesh, PrepareModuleOutput(
            output_layouts=Replicate(), desired_output_layouts=Shard(0)))(x), contains="same length")


# ---- plans ----

def test_megatron_mlp_plan_equals_the_unparallelized_mlp():
    for mesh in meshes():
        for dim, hidden in ((8, 16), (8, 6), (4, 3)):
            torch.manual_seed(10)
            mlp = MLP(dim, hidden)
            x = torch.randn(2, 5, dim)
            expected = mlp(x)
            parallelize_module(mlp, mesh, {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()})
            assert placements_of(mlp) == {"w1.weight": tp(mesh, Shard(0)), "w1.bias": tp(mesh, Shard(0)),
                                          "w2.weight": tp(mesh, Shard(1)), "w2.bias": tp(mesh, Replicate()),
                                          "w3.weight": tp(mesh, Shard(0))}, placements_of(mlp)
            hidden_in = record_inputs(mlp.w2)
            got = mlp(x)
            assert hidden_in[0][0] == [tp(mesh, Shard(2))], hidden_in  # the hidden activations stay sharded
            assert got.placements == tp(mesh, Replicate())
            assert_same(got, expected, "MLP %r dim=%d hidden=%d" % (mesh, dim, hidden))


def test_attention_block_with_sequence_parallel_norms_equals_the_unparallelized_block():
    for m, mesh in enumerate(meshes()):
        for d, (dim, heads, hidden, seq) in enumerate(((8, 2, 16, 8), (6, 3, 6, 5), (3, 1, 3, 3))):
            # Every build: one norm per mesh and size, taking turns, so that each size meets both norms over the meshes;
            # the slow run: both norms everywhere.
            for norm in iterations([(nn.LayerNorm, nn.RMSNorm)[(m + d) % 2]], [nn.LayerNorm, nn.RMSNorm]):
                torch.manual_seed(11)
                block = randomize(Block(dim, heads, hidden, norm))
                x = torch.randn(2, seq, dim)
                expected = block(x)
                parallelize_module(block, mesh, BLOCK_PLAN)
                layouts = placements_of(block)
                for name in ("attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "feed_forward.w1.weight"):
                    assert layouts[name] == tp(mesh, Shard(0)), (name, layouts[name])
                assert layouts["attention.wo.weight"] == tp(mesh, Shard(1))
                assert layouts["attention_norm.weight"] == tp(mesh, Replicate())
                norm_in, attention_in, wo_in = (record_inputs(m) for m in (block.attention_norm, block.attention,
                                                                            block.attention.wo))
                got = block(x)
                assert [along_tp(p, mesh) for p in norm_in[0][0]] == [Shard(1)], norm_in
                assert [along_tp(p, mesh) for p in attention_in[0][0]] == [Replicate()], attention_in
                assert [along_tp(p, mesh) for p in wo_in[0][0]] == [Shard(2)], wo_in
                assert along_tp(got.placements, mesh) == Replicate(), got.placements
                assert_same(got, expected, "block %r dim=%d heads=%d %s" % (mesh, dim, heads, norm.__name__))


def test_wildcard_plan_reaches_every_layer_and_nested_plans_apply_below_their_key():
    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("tp",))
    torch.manual_seed(12)
    model = randomize(Transformer(vocab=10, dim=8, heads=2, hidden=6, layers=2))
    tokens = torch.tensor([[1, 2, 3, 4, 5], [9, 8, 7, 6, 5]])
    expected = model(tokens)
    layer_plan = {key: style for key, style in BLOCK_PLAN.items() if key}
    plan = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "layers.*.attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "layers.*": {key: style for key, style in layer_plan.items() if key != "attention"},
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    }
    parallelize_module(model, mesh, plan)
    layouts = parameter_layouts(model)
    for i in range(2):
        assert layouts["layers.%d.attention.wq.weight" % i] == (mesh, (Shard(0),))
        assert layouts["layers.%d.feed_forward.w2.weight" % i] == (mesh, (Shard(1),))
        assert layouts["layers.%d.ffn_norm.weight" % i].placements == (Replicate(),)
    assert layouts["tok_embeddings.weight"].placements == (Shard(0),)
    assert layouts["output.weight"].placements == (Shard(0),)
    got = model(tokens)
    assert got.placements == (Replicate(),)
    assert_same(got, expected, "transformer with wildcard plan")


def test_a_key_with_a_wildcard_selects_the_children_that_have_the_rest():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = MLP(4, 4)
            self.b = nn.Linear(4, 4)

    model = Two()
    mesh = dtorch.init_device_mesh("cpu", (2,))
    parallelize_module(model, mesh, {"*.w1": ColwiseParallel(), "[b]": ColwiseParallel()})
    layouts = parameter_layouts(model)
    assert layouts["a.w1.weight"].placements == (Shard(0),) and layouts["b.weight"].placements == (Shard(0),)
    assert layouts["a.w2.weight"] == (None, ()) and isinstance(model.a.w2.weight, torch.Tensor)


def test_parameter_layouts_name_the_mesh_dimension_the_style_applies_along():
    for shape, names, expected in (((2, 2), ("dp", "tp"), (Replicate(), Shard(0))),
                                   ((2, 2), ("tp", "dp"), (Shard(0), Replicate())),
                                   ((2, 2), None, (Replicate(), Shard(0)))):
        mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
        torch.manual_seed(13)
        mlp = MLP(4, 6)
        x = torch.randn(3, 4)
        reference = mlp(x)
        mlp.register_buffer("scale", torch.ones(4))
        parallelize_module(mlp, mesh, {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()})
        layouts = parameter_layouts(mlp)
        assert list(layouts) == ["w1.weight", "w1.bias", "w2.weight", "w2.bias", "w3.weight"], list(layouts)
        device_mesh, placements = layouts["w1.weight"]
        assert device_mesh == mesh and placements == expected, (names, placements)
        assert parameter_layouts(mlp, include_buffers=True)["scale"] == (None, ())
        assert_same(mlp(x), reference, "MLP on %r" % mesh)


def test_a_two_dimensional_mesh_keeps_a_batch_sharded_over_dp():
    config = ParallelConfig(dp=2, tp=2)
    mesh = config.device_mesh("cpu")
    torch.manual_seed(14)
    mlp = MLP(8, 6)
    x = torch.randn(4, 3, 8)
    expected = mlp(x)
    parallelize_module(mlp, mesh, {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()})
    batch = [Replicate()] * mesh.ndim
    batch[0] = Shard(0)
    got = mlp(dtorch.distribute_tensor(x, mesh, batch))
    want = list(batch)
    want[-1] = Replicate()
    assert got.placements == tuple(want), got.placements
    assert_same(got, expected, "MLP with a dp-sharded batch")


def test_the_tp_sub_mesh_runs_on_the_first_devices_tp_group():
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(15)
    mlp = MLP(8, 6)
    x = torch.randn(2, 8)
    expected = mlp(x)
    parallelize_module(mlp, mesh["tp"], {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()})
    assert mlp.w1.weight.device_mesh.device_ids == [0, 1]
    assert_same(mlp(x), expected, "MLP on mesh['tp']")


# ---- distribute_module ----

def test_distribute_module_replicates_what_partition_fn_leaves_and_installs_the_hooks():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    torch.manual_seed(16)
    mlp = MLP(4, 8)
    mlp.register_buffer("offset", torch.randn(4))
    x = torch.randn(3, 4)
    expected = mlp(x) + mlp.offset
    calls = []

    def partition_fn(name, module, device_mesh):
        calls.append(name)
        if name == "w1":
            module.register_parameter("weight", nn.Parameter(dtorch.distribute_tensor(module.weight, device_mesh,
                                                                                      [Shard(0)])))

    def input_fn(module, inputs, device_mesh):
        assert module is mlp and device_mesh == mesh
        return dtorch.distribute_tensor(inputs[0], device_mesh, [Shard(0)])

    def output_fn(module, outputs, device_mesh):
        return (outputs + module.offset).redistribute(device_mesh, [Replicate()])

    assert dtorch.distribute_module(mlp, mesh, partition_fn, input_fn, output_fn) is mlp
    assert calls == ["", "w1", "w2", "w3"], calls
    assert placements_of(mlp)["w1.weight"] == (Shard(0),)
    assert all(pl == (Replicate(),) for name, pl in placements_of(mlp).items() if name != "w1.weight")
    assert mlp.offset.placements == (Replicate(),)
    got = mlp(x)
    assert got.placements == (Replicate(),)
    assert_same(got, expected, "distribute_module")
    raises(RuntimeError, lambda: dtorch.distribute_module(mlp, mesh), contains="only be called once")


def test_distribute_module_takes_the_deprecated_two_argument_functions_with_a_warning():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    linear = nn.Linear(3, 3)
    x = torch.randn(2, 3)
    expected = linear(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dtorch.distribute_module(linear, mesh, input_fn=lambda inputs, m: dtorch.distribute_tensor(inputs[0], m, [Shard(0)]),
                                 output_fn=lambda outputs, m: outputs.redistribute(m, [Replicate()]))
    assert [w.category for w in caught] == [FutureWarning, FutureWarning], caught
    assert_same(linear(x), expected, "two-argument hooks")


def test_distribute_module_refuses_hooks_of_another_arity_before_changing_anything():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    linear = nn.Linear(3, 3)
    raises(ValueError, lambda: dtorch.distribute_module(linear, mesh, input_fn=lambda a, b, c, d: a),
           contains="input_fn should take 3 arguments")
    raises(ValueError, lambda: dtorch.distribute_module(linear, mesh, output_fn=lambda a: a),
           contains="output_fn should take 3 arguments")
    assert isinstance(linear.weight, torch.Tensor) and not getattr(linear, "_distribute_module_applied", False)
    raises(TypeError, lambda: dtorch.distribute_module(torch.randn(2), mesh), contains="torch.nn.Module")


# ---- errors ----

def test_styles_refuse_module_types_they_do_not_support_before_anything_changes():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    for style in (ColwiseParallel(), RowwiseParallel()):
        norm = nn.LayerNorm(4)
        raises(NotImplementedError, lambda: parallelize_module(norm, mesh, style),
               contains="%s supports nn.Linear and nn.Embedding only, got LayerNorm" % type(style).__name__)
        block = Block(4, 1, 4)
        raises(NotImplementedError, lambda: parallelize_module(block, mesh, {"feed_forward.w1": ColwiseParallel(),
                                                                             "ffn_norm": style}),
               contains="at 'ffn_norm'")
        assert isinstance(block.feed_forward.w1.weight, torch.Tensor)  # the valid entry did not run either
    for style in (SequenceParallel(), PrepareModuleInput(input_layouts=Shard(0), desired_input_layouts=Replicate())):
        parallelize_module(nn.Dropout(0.0), mesh, style)  # any module, as in PyTorch


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_keys_that_match_no_submodule_are_skipped_with_a_warning_and_bad_plans_refused_before_anything_changes():
    mesh = dtorch.init_device_mesh("cpu", (2,))
    mlp = MLP(4, 4)
    # As in PyTorch: the entry is skipped, with a warning that names it; the others apply.
    caught = _warnings_of(lambda: parallelize_module(mlp, mesh, {"w1": ColwiseParallel(), "w4": ColwiseParallel()}))
    assert caught == ["parallelize_plan key 'w4' matches no submodule: no child of the root module (children: 'w1', "
                      "'w2', 'w3') matches 'w4'; skipping this plan entry"], caught
    assert isinstance(mlp.w1.weight, dtorch.Tensor) and mlp.w1.weight.placements == (Shard(0),)
    assert isinstance(mlp.w2.weight, torch.Tensor)
    model = Transformer(10, 4, 1, 4, 2)
    caught = _warnings_of(lambda: parallelize_module(model, mesh, {"layers.*.attn": ColwiseParallel()}))
    assert len(caught) == 1 and "'layers.*.attn' matches no submodule" in caught[0], caught
    caught = _warnings_of(lambda: parallelize_module(model, mesh, {"layers": {"2": ColwiseParallel()}}))
    assert len(caught) == 1 and "'layers.2' matches no submodule" in caught[0], caught
    raises(ValueError, lambda: parallelize_module(model, mesh, {"layers..w1": ColwiseParallel()}), contains="empty part")
    raises(TypeError, lambda: parallelize_module(model, mesh, ["output"]), contains="parallelize_plan must be")
    raises(TypeError, lambda: parallelize_module(model, mesh, {"output": "colwise"}), contains="parallelize_plan['output']")
    raises(ValueError, lambda: parallelize_module(model, mesh, {"output": ColwiseParallel(), "out*": RowwiseParallel()}),
           contains="two styles that distribute it")
    assert all(isinstance(p, torch.Tensor) for p in model.parameters())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert parallelize_module(model, mesh) is model
    assert len(caught) == 1 and "no parallelize_plan" in str(caught[0].message)


def test_style_arguments_are_checked_when_the_style_is_made():
    raises(TypeError, lambda: ColwiseParallel(input_layouts="replicate"), contains="input_layouts must be a Placement")
    raises(TypeError, lambda: ColwiseParallel(Replicate()))  # keyword-only, as in PyTorch
    raises(ValueError, lambda: PrepareModuleInput(input_layouts=(Shard(0), None), desired_input_layouts=(Replicate(),)),
           contains="same length")
    raises(ValueError, lambda: PrepareModuleInput(input_layouts=Shard(0)), contains="desired_input_layouts must be given")
    raises(TypeError, lambda: SequenceParallel(sequence_dim=1.0), contains="sequence_dim must be an int")
    assert isinstance(ColwiseParallel(), ParallelStyle) and isinstance(PrepareModuleOutput(
        output_layouts=Partial(), desired_output_layouts=Replicate()), ParallelStyle)
    assert ColwiseParallel().output_layouts == (Shard(-1),) and RowwiseParallel().input_layouts == (Shard(-1),)
    assert ColwiseParallel().use_local_output and not SequenceParallel().use_local_output


if __name__ == "__main__":
    run(globals())
