"""Training checkpoints (dtorch.checkpoint): a dp x tp model's and its optimizer's state saved at step k and loaded into a
fresh model and optimizer continue with exactly the losses of the run that never stopped (SGD with momentum, AdamW with
LambdaLR and with CosineAnnealingLR); a checkpoint saved on a 2 x 2 mesh loads onto a 4-device mesh and onto one device
(the saved global tensors resharded), with the saved values exactly and the uninterrupted run's losses to 1e-5; a
missing or damaged checkpoint, a key it lacks and a shape that differs raise errors naming the file and the key, and
leave the model and optimizer as they were. An optimizer's own state_dict/load_state_dict carries distributed state onto
parameters of the same layouts."""

import json
import math
import os
import tempfile

import dtorch
import torch
import torch.nn.functional as F
from dtorch import Replicate, Shard
from dtorch import checkpoint as dcp
from dtorch.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from _models import MLP
from _testing import iterations, raises, run

GRID = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
LINE = dtorch.init_device_mesh("cpu", (4,))
STEPS, SAVE_AT = 4, 2


def model_on(mesh, seed, hidden=12):
    """The MLP with the seed's weights: tensor parallel along the mesh's last dimension, replicated along the others
    (a 2-d mesh is dp x tp); mesh None gives the one-device model."""
    torch.manual_seed(seed)
    model = MLP(hidden=hidden)
    if mesh is not None:
        parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
        dtorch.distribute_module(model, mesh)
    return model


def batch(step, mesh):
    torch.manual_seed(100 + step)
    x, y = torch.randn(16, 8), torch.randn(16, 8)
    if mesh is None:
        return x, y
    layout = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    return dtorch.distribute_tensor(x, mesh, layout), dtorch.distribute_tensor(y, mesh, layout)


def train_step(model, optimizer, scheduler, step, mesh):
    x, y = batch(step, mesh)
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def save(directory, model, optimizer, scheduler, step):
    model_sd, optim_sd = dcp.get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd, "step": step}
    if scheduler is not None:
        state["scheduler"] = scheduler.state_dict()
    dcp.save(state, directory)


def resume(directory, model, optimizer, scheduler):
    model_sd, optim_sd = dcp.get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd, "step": -1}
    if scheduler is not None:
        state["scheduler"] = scheduler.state_dict()
    dcp.load(state, directory)
    dcp.set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    if scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    return state["step"]


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01), None


def adamw_lambda(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0 / (1 + epoch))


def adamw_cosine(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, amsgrad=True)
    return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4, eta_min=1e-3)


def uninterrupted(make, directory, mesh=GRID):
    """The losses of STEPS steps; the state after SAVE_AT steps saved to `directory`."""
    model = model_on(mesh, seed=1)
    optimizer, scheduler = make(model)
    losses = []
    for step in range(STEPS):
        if step == SAVE_AT:
            save(directory, model, optimizer, scheduler, step)
        losses.append(train_step(model, optimizer, scheduler, step, mesh))
    return losses


def resumed(make, directory, mesh):
    """The losses of the steps after the checkpoint, from a model of other weights and a fresh optimizer."""
    model = model_on(mesh, seed=2)
    optimizer, scheduler = make(model)
    start = resume(directory, model, optimizer, scheduler)
    assert start == SAVE_AT, start
    return [train_step(model, optimizer, scheduler, step, mesh) for step in range(start, STEPS)], model


def test_a_resumed_run_continues_with_the_losses_of_the_uninterrupted_one():
    # Every build resumes the optimizer with the most state (moments, their maximum, a schedule); the slow run all three.
    cases = [("AdamW amsgrad CosineAnnealingLR", adamw_cosine), ("SGD momentum", sgd), ("AdamW LambdaLR", adamw_lambda)]
    for name, make in cases[:iterations(1, len(cases))]:
        with tempfile.TemporaryDirectory() as directory:
            want = uninterrupted(make, directory)
            got, _ = resumed(make, directory, GRID)
            assert got == want[SAVE_AT:], "%s: resumed %r, uninterrupted %r" % (name, got, want[SAVE_AT:])


def test_the_checkpoint_keeps_the_optimizer_state_and_the_schedule():
    with tempfile.TemporaryDirectory() as directory:
        uninterrupted(adamw_lambda, directory)
        assert os.listdir(directory) == ["checkpoint.safetensors"], os.listdir(directory)
        header = dtorch.safetensors.open_header(os.path.join(directory, "checkpoint.safetensors"))
        document = json.loads(header.metadata["dtorch.checkpoint"])
        for key in ("model.up.weight", "optim.state.up.weight.exp_avg", "optim.state.up.weight.exp_avg_sq",
                    "optim.state.up.weight.step", "optim.state.norm.weight.exp_avg"):
            assert key in header.tensors, sorted(header.tensors)
        assert header.tensors["model.up.weight"].shape == (12, 8)
        assert header.tensors["optim.state.up.weight.step"].shape == ()
        top = dict(document["state"]["dict"])
        assert top["step"] == SAVE_AT
        scheduler = dict(dict(top["scheduler"]["dict"]).items())
        assert scheduler["last_epoch"] == SAVE_AT, scheduler
        groups = dict(top["optim"]["dict"])["param_groups"]["list"]
        group = dict(groups[0]["dict"])
        assert group["lr"] == 0.01 * (1.0 / (1 + SAVE_AT)), group["lr"]
        assert group["betas"] == {"tuple": [0.9, 0.999]}, group["betas"]

        model = model_on(GRID, seed=2)
        optimizer, scheduler = adamw_lambda(model)
        resume(directory, model, optimizer, scheduler)
        assert optimizer.param_groups[0]["lr"] == 0.01 * (1.0 / (1 + SAVE_AT))
        assert optimizer.param_groups[0]["betas"] == (0.9, 0.999)
        assert scheduler.last_epoch == SAVE_AT
        p = model.up.weight
        state = optimizer.state[p]
        assert state["step"].full_tensor().item() == SAVE_AT
        assert tuple(state["exp_avg"].placements) == tuple(p.placements), state["exp_avg"].placements
        assert state["exp_avg"].device_mesh == GRID


def test_a_checkpoint_loads_onto_another_mesh_and_onto_one_device():
    with tempfile.TemporaryDirectory() as directory:
        want = uninterrupted(adamw_cosine, directory)
        saved = dcp.load({"model": {k: torch.zeros(v.shape) for k, v in model_on(None, 9).state_dict().items()}},
                         directory)["model"]
        for mesh in (LINE, None):
            got, model = resumed(adamw_cosine, directory, mesh)
            where = "one device" if mesh is None else "mesh %s" % (mesh,)
            for step, (g, w) in enumerate(zip(got, want[SAVE_AT:]), SAVE_AT):
                assert abs(g - w) <= 1e-5 * abs(w), "%s step %d: loss %r, uninterrupted %r" % (where, step, g, w)
        # The weights as loaded, before training on: exactly the saved ones.
        model = model_on(LINE, seed=3)
        optimizer, scheduler = adamw_cosine(model)
        resume(directory, model, optimizer, scheduler)
        for name, value in model.state_dict().items():
            assert torch.equal(value.full_tensor(), saved[name]), name
        assert tuple(model.up.weight.placements) == (Shard(0),), model.up.weight.placements


def test_bad_checkpoints_name_the_file_and_the_key_and_change_nothing():
    with tempfile.TemporaryDirectory() as directory:
        uninterrupted(sgd, directory)
        model = model_on(GRID, seed=2)
        optimizer, _ = sgd(model)
        train_step(model, optimizer, None, 0, GRID)
        before = {k: v.full_tensor() for k, v in model.state_dict().items()}
        buffer_before = optimizer.state[model.up.weight]["momentum_buffer"].full_tensor()

        def attempt(path, state=None):
            model_sd, optim_sd = dcp.get_state_dict(model, optimizer)
            dcp.load(state if state is not None else {"model": model_sd, "optim": optim_sd}, path)

        raises(FileNotFoundError, attempt, os.path.join(directory, "nowhere"), contains="nowhere")
        empty = os.path.join(directory, "empty")
        os.makedirs(empty)
        raises(FileNotFoundError, attempt, empty, contains="checkpoint.safetensors is missing")
        raises(dcp.CheckpointError, attempt, directory, {"model": {}, "epoch": 1}, contains="'epoch' is not in the checkpoint")
        raises(dcp.CheckpointError, attempt, directory, {"model": model_on(GRID, seed=4, hidden=16).state_dict()},
               contains="'model.up.weight' has the shape [16, 8] here but [12, 8] in the checkpoint")
        raises(dcp.CheckpointError, attempt, directory, {"step": torch.zeros(2)}, contains="'step' is a tensor here")

        damaged = os.path.join(directory, "damaged")
        os.makedirs(damaged)
        with open(os.path.join(directory, "checkpoint.safetensors"), "rb") as f:
            data = f.read()
        with open(os.path.join(damaged, "checkpoint.safetensors"), "wb") as f:
            f.write(data[:len(data) // 2])
        e = raises(ValueError, attempt, damaged)
        assert "damaged/checkpoint.safetensors" in str(e), e
        dtorch.safetensors.save_file({}, os.path.join(damaged, "checkpoint.safetensors"),
                                     metadata={"dtorch.checkpoint": "{ not json"})
        raises(dcp.CheckpointError, attempt, damaged, contains="'dtorch.checkpoint' metadata is not JSON")
        dtorch.safetensors.save_file({}, os.path.join(damaged, "checkpoint.safetensors"))
        raises(dcp.CheckpointError, attempt, damaged, contains="without the 'dtorch.checkpoint' metadata")

        for name, value in model.state_dict().items():
            assert torch.equal(value.full_tensor(), before[name]), name
        assert torch.equal(optimizer.state[model.up.weight]["momentum_buffer"].full_tensor(), buffer_before)
        loss = train_step(model, optimizer, None, 1, GRID)
        assert math.isfinite(loss), loss


def test_an_optimizers_own_state_dict_carries_distributed_state_onto_the_same_layouts():
    torch.manual_seed(7)
    value, grad = torch.randn(8, 4), torch.randn(8, 4)
    params = [dtorch.distribute_tensor(value, LINE, [Shard(0)]).requires_grad_() for _ in range(2)]
    first = torch.optim.AdamW([params[0]], lr=0.1)
    (params[0] * dtorch.distribute_tensor(grad, LINE, [Shard(0)])).sum().backward()
    first.step()
    second = torch.optim.AdamW([params[1]], lr=0.5)
    second.load_state_dict(first.state_dict())
    with torch.no_grad():
        params[1].copy_(params[0])
    for p, opt in zip(params, (first, second)):
        opt.zero_grad()
        (p * dtorch.distribute_tensor(grad, LINE, [Shard(0)])).sum().backward()
        opt.step()
    state = second.state[params[1]]
    assert tuple(state["exp_avg"].placements) == (Shard(0),), state["exp_avg"].placements
    assert state["step"].full_tensor().item() == 2 and second.param_groups[0]["lr"] == 0.1
    assert torch.equal(params[1].full_tensor(), params[0].full_tensor())


def test_values_a_checkpoint_cannot_keep_are_refused_before_writing():
    with tempfile.TemporaryDirectory() as directory:
        raises(TypeError, dcp.save, {"model": {"f": lambda: 0}}, directory, contains="'model.f' is a function")
        raises(TypeError, dcp.save, {"s": {1, 2}}, directory, contains="'s' is a set")
        assert os.listdir(directory) == [], os.listdir(directory)


run(globals())
