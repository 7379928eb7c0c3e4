"""dtorch.fully_shard: a model fully sharded over 4 devices, and fully sharded beside tensor parallelism on a 2 x 2
("dp", "tp") mesh, trains with AdamW and gradient clipping to the losses of the same model on one device (1e-4
relative, step by step); parameters and gradients are Shard(0) over "dp" (with the tensor-parallel placement on "tp"),
each device holds 1/dp of a parameter between steps (uneven and empty shards included), and the gathered parameters
of a block are released after its forward."""

import dtorch
import torch
import torch.nn as nn
import torch.nn.functional as F
from dtorch import Replicate, Shard
from dtorch.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from _testing import iterations, raises, run, settled

STEPS = iterations(3, 8)
# Uneven first dimensions on 4 devices: 10 rows are 3, 3, 2, 2; 3 rows are 1, 1, 1, 0 (an empty shard).
IN, HIDDEN, OUT = 6, 10, 3


class Block(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out)

    def forward(self, x):
        return F.gelu(self.proj(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = Block(IN, HIDDEN)
        self.mid = Block(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        return self.head(self.mid(self.inp(x)))


def reference_and_state():
    torch.manual_seed(3)
    reference = Net()
    return reference, {k: v.detach().clone() for k, v in reference.state_dict().items()}


def batches():
    torch.manual_seed(5)
    return [(torch.randn(8, IN), torch.randn(8, OUT)) for _ in range(STEPS)]


def train(model, data, params):
    """AdamW steps of an MSE loss with gradient clipping; the losses, and a check per step run on the model after it."""
    opt = torch.optim.AdamW(params, lr=2e-2)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 0.05)  # below the gradients' norm: clipping scales them
        opt.step()
        losses.append(loss.item())
    return losses


def same_losses(got, want, what):
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-4 * abs(w), "%s step %d: loss %r, one device %r" % (what, step, g, w)


def local_rows(t):
    return [s.shape[0] if s.dim() else 1 for s in t.to_local()]


def test_fully_sharded_training_matches_one_device():
    reference, state = reference_and_state()
    data = batches()
    want = train(reference, data, list(reference.parameters()))

    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    model = Net()
    model.load_state_dict(state)
    for block in (model.inp, model.mid):
        dtorch.fully_shard(block, mesh)
    dtorch.fully_shard(model, mesh)
    assert isinstance(model, dtorch.FSDPModule) and isinstance(model.inp, dtorch.FSDPModule)
    assert isinstance(model, Net), "the module keeps its class as a base"
    params = list(model.parameters())
    assert len(params) == 6
    for name, p in model.named_parameters():
        assert isinstance(p, nn.Parameter) and p.requires_grad, name
        assert list(p.placements) == [Shard(0)], "%s: %r" % (name, p.placements)
    assert local_rows(model.mid.proj.weight) == [3, 3, 2, 2]
    assert local_rows(model.head.bias) == [1, 1, 1, 0]

    batch = [Shard(0)]
    got = train(model, [(dtorch.distribute_tensor(x, mesh, batch), dtorch.distribute_tensor(y, mesh, batch))
                        for x, y in data], params)
    same_losses(got, want, "fully sharded")
    ref = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        assert list(p.placements) == [Shard(0)], name
        assert list(p.grad.placements) == [Shard(0)], "%s: gradient %r" % (name, p.grad.placements)
        assert [s.shape for s in p.grad.to_local()] == [s.shape for s in p.to_local()], name
        assert torch.allclose(p.full_tensor(), ref[name].detach(), rtol=1e-4, atol=1e-5), name
    assert local_rows(model.inp.proj.weight) == [3, 3, 2, 2], "parameters stay sharded between steps"


def test_fully_shard_beside_tensor_parallel_matches_one_device():
    reference, state = reference_and_state()
    data = batches()
    want = train(reference, data, list(reference.parameters()))

    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = Net()
    model.load_state_dict(state)
    parallelize_module(model, mesh, {"inp.proj": ColwiseParallel(), "mid.proj": RowwiseParallel()})
    dtorch.fully_shard(model.inp, mesh["dp"])
    dtorch.fully_shard(model.mid, mesh["dp"])
    dtorch.fully_shard(model, mesh)
    placements = {name: list(p.placements) for name, p in model.named_parameters()}
    assert placements == {
        "inp.proj.weight": [Shard(0), Shard(0)], "inp.proj.bias": [Shard(0), Shard(0)],
        "mid.proj.weight": [Shard(0), Shard(1)], "mid.proj.bias": [Shard(0), Replicate()],
        "head.weight": [Shard(0), Replicate()], "head.bias": [Shard(0), Replicate()]}, placements
    # 10 rows: 5 and 5 over "dp", then 3, 2 and 3, 2 over "tp"; 3 rows of the head: 2 and 1, replicated over "tp".
    assert local_rows(model.inp.proj.weight) == [3, 2, 3, 2]
    assert local_rows(model.head.weight) == [2, 2, 1, 1]

    batch = [Shard(0), Replicate()]
    params = list(model.parameters())
    got = train(model, [(dtorch.distribute_tensor(x, mesh, batch), dtorch.distribute_tensor(y, mesh, batch))
                        for x, y in data], params)
    same_losses(got, want, "fully sharded x tensor parallel")
    for name, p in model.named_parameters():
        assert list(p.placements) == placements[name], name
        assert list(p.grad.placements) == placements[name], "%s: gradient %r" % (name, p.grad.placements)


def live_bytes():
    return dtorch.memory_stats(0)["blobs.live_bytes"]


def live_bytes_after_forward(reshard_after_forward):
    """Device 0's tensor bytes a forward adds (the tape's saved tensors, and the gathered parameters it keeps)."""
    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    torch.manual_seed(3)
    model = Net()
    for block in (model.inp, model.mid):
        dtorch.fully_shard(block, mesh, reshard_after_forward=reshard_after_forward)
    dtorch.fully_shard(model, mesh)
    x = dtorch.distribute_tensor(torch.randn(8, IN), mesh, [Shard(0)])
    # Read once collections have freed what earlier steps and the forward's temporaries dropped: what stays is what the
    # model, the input and the forward's output (with its tape) hold.
    before = settled(live_bytes, "device 0's live bytes before the forward")
    out = model(x)
    after = settled(live_bytes, "device 0's live bytes after the forward")
    out.sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and list(g.placements) == [Shard(0)] for g in grads)
    return after - before


def test_gathered_parameters_are_released_after_forward():
    kept = live_bytes_after_forward(False)
    released = live_bytes_after_forward(True)
    # The two blocks' gathered weights and biases, whole on device 0, in float32.
    gathered = 4 * (HIDDEN * IN + HIDDEN + HIDDEN * HIDDEN + HIDDEN)
    assert kept - released == gathered, "kept %d, released %d: expected the difference %d" % (kept, released, gathered)


def test_fully_shard_refuses_bad_input_before_moving_anything():
    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    model = Net()
    raises(TypeError, dtorch.fully_shard, torch.zeros(2), mesh)
    raises(NotImplementedError, dtorch.fully_shard, model, mesh, mp_policy=object(), contains="mp_policy")
    raises(NotImplementedError, dtorch.fully_shard, model, mesh, reshard_after_forward=2)
    assert not isinstance(model.head.weight, dtorch.Tensor), "a refused call changes nothing"
    dtorch.fully_shard(model, mesh)
    raises(RuntimeError, dtorch.fully_shard, model, mesh, contains="sharded already")
    sharded = nn.Linear(4, 4)
    dtorch.distribute_module(sharded, mesh, lambda name, m, dm: [
        m.register_parameter(n, nn.Parameter(dtorch.distribute_tensor(p.detach(), dm, [Shard(0)])))
        for n, p in list(m._parameters.items())])
    raises(ValueError, dtorch.fully_shard, sharded, mesh, contains="must be Replicate()")
    mesh2 = dtorch.init_device_mesh("cpu", (2, 2))
    raises(NotImplementedError, dtorch.fully_shard, nn.Linear(4, 4), mesh2, contains="HSDP")


def test_no_grad_forward_of_a_fully_sharded_module():
    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    reference, state = reference_and_state()
    model = Net()
    model.load_state_dict(state)
    dtorch.fully_shard(model.mid, mesh)
    dtorch.fully_shard(model, mesh)
    x = torch.randn(8, IN)
    with torch.no_grad():
        got = model(dtorch.distribute_tensor(x, mesh, [Shard(0)])).full_tensor()
        assert torch.allclose(got, reference(x), rtol=1e-5, atol=1e-6)
    assert list(model.mid.proj.weight.placements) == [Shard(0)]


def test_the_user_guide_example_trains():
    mesh = dtorch.init_device_mesh("cpu", (4,), mesh_dim_names=("dp",))
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16))
    dtorch.fully_shard(model[0], mesh)
    dtorch.fully_shard(model[2], mesh)
    dtorch.fully_shard(model, mesh)
    assert list(model[0].weight.placements) == [Shard(0)] and local_rows(model[0].weight) == [16] * 4
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = dtorch.randn(32, 16, device_mesh=mesh, placements=[Shard(0)])
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = F.mse_loss(model(x), x)
        loss.backward()
        nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        opt.step()
        losses.append(loss.item())
    assert losses[1] < losses[0], losses


run(globals())
