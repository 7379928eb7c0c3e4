"""torch.autograd.Function on distributed tensors: custom forward/backward pairs in both styles, against the same
computation differentiated by the tape, on sharded and replicated inputs; needs_input_grad, non-differentiable outputs,
create_graph through a custom backward, and the errors torch gives for a wrong backward; post-accumulate-grad hooks."""

import dtorch
import torch
import torch.nn.functional as F
from torch.autograd import Function
from torch.autograd.function import once_differentiable
from dtorch import Replicate, Shard
from _testing import raises, run

MESH = dtorch.init_device_mesh("cpu", (4,))


def close(got, want, what, atol=1e-5):
    value = got.full_tensor() if isinstance(got, dtorch.Tensor) else got
    assert value.shape == want.shape, (what, value.shape, want.shape)
    assert torch.allclose(value, want, rtol=1e-4, atol=atol), (what, (value - want).abs().max().item())


class ScaledProduct(Function):
    """x * w * scale, with its derivative written by hand."""

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x * w * scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return (g * w * ctx.scale if ctx.needs_input_grad[0] else None,
                g * x * ctx.scale if ctx.needs_input_grad[1] else None, None)


class Clip(Function):
    """A straight-through estimator in the setup_context style: clamps forward, passes the gradient through."""

    @staticmethod
    def forward(x, low, high):
        return x.clamp(low, high)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return g, None, None


class SplitAndCount(Function):
    """Two outputs and an integer one marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        positive = (x > 0).to(torch.int64).sum()
        ctx.mark_non_differentiable(positive)
        return x.exp(), x * 2, positive

    @staticmethod
    def backward(ctx, g_exp, g_double, g_count):
        assert g_count is None, g_count
        return g_exp + g_double * 2  # not exp's derivative: what backward returns is what the inputs get


class Identity(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 3


def test_a_custom_product_differentiates_like_the_tape_on_sharded_and_replicated_inputs():
    torch.manual_seed(1)
    x, w = torch.randn(6, 5), torch.randn(6, 5)
    for px, pw in [([Shard(0)], [Shard(0)]), ([Shard(1)], [Replicate()]), ([Replicate()], [Shard(0)])]:
        dx = dtorch.distribute_tensor(x, MESH, px).requires_grad_(True)
        dw = dtorch.distribute_tensor(w, MESH, pw).requires_grad_(True)
        out = ScaledProduct.apply(dx, dw, 0.5)
        assert out.grad_fn.name() == "ScaledProductBackward" and out.requires_grad
        (out.sin()).sum().backward()
        close(dx.grad, (x * w * 0.5).cos() * w * 0.5, "x's gradient %s %s" % (px, pw))
        close(dw.grad, (x * w * 0.5).cos() * x * 0.5, "w's gradient")
        assert dx.grad.placements == tuple(px) or list(dx.grad.placements) == px


def test_needs_input_grad_and_arguments_that_do_not_require_grad():
    x = dtorch.distribute_tensor(torch.ones(4, 2), MESH, [Shard(0)]).requires_grad_(True)
    w = dtorch.distribute_tensor(torch.full((4, 2), 3.0), MESH, [Shard(0)])
    seen = []

    class Recording(ScaledProduct):
        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return ScaledProduct.backward(ctx, g)

    Recording.apply(x, w, 2.0).sum().backward()
    assert seen == [(True, False, False)], seen
    close(x.grad, torch.full((4, 2), 6.0), "x's gradient")
    assert w.grad is None
    with torch.no_grad():
        y = ScaledProduct.apply(x, w, 2.0)
    assert not y.requires_grad and y.grad_fn is None


def test_setup_context_style_once_differentiable_and_several_outputs():
    torch.manual_seed(2)
    x = torch.randn(8)
    dx = dtorch.distribute_tensor(x, MESH, [Shard(0)]).requires_grad_(True)
    Clip.apply(dx, -0.5, 0.5).pow(2).sum().backward()
    close(dx.grad, 2 * x.clamp(-0.5, 0.5), "straight-through gradient")
    dx.grad = None
    e, d, count = SplitAndCount.apply(dx)
    assert not count.requires_grad and count.full_tensor().item() == int((x > 0).sum().item())
    (e.sum() + d.sum()).backward()
    close(dx.grad, torch.ones(8) * 3, "g_exp + 2 g_double with both gradients one")
    dx.grad = None
    e, _, _ = SplitAndCount.apply(dx)
    e.sum().backward()  # the second output gets no gradient: backward receives zeros for it
    close(dx.grad, torch.ones(8), "only the first output reached")
    dx.grad = None
    y = Identity.apply(dx)
    assert y is not dx and y.requires_grad
    y.sum().backward()
    close(dx.grad, torch.full((8,), 3.0), "an input returned as it is")


def test_create_graph_differentiates_a_custom_backward_again():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    x = torch.tensor([1.0, 2.0, -1.0, 0.5])
    dx = dtorch.distribute_tensor(x, MESH, [Shard(0)]).requires_grad_(True)
    (first,) = torch.autograd.grad(Cube.apply(dx).sum(), [dx], create_graph=True)
    close(first, 3 * x * x, "first derivative")
    first.sum().backward()
    close(dx.grad, 6 * x, "second derivative through the custom backward")


def test_a_wrong_backward_gets_torchs_errors_and_torch_tensors_are_refused():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum()

    x = dtorch.distribute_tensor(torch.ones(4, 3), MESH, [Shard(0)]).requires_grad_(True)
    raises(RuntimeError, lambda: TooFew.apply(x, x).sum().backward(), contains="returned an incorrect number of gradients")
    raises(RuntimeError, lambda: WrongShape.apply(x).sum().backward(), contains="returned an invalid gradient at index 0")
    raises(RuntimeError, ScaledProduct.apply, torch.ones(3, requires_grad=True), torch.ones(3), 1.0,
           contains="custom autograd functions run on distributed tensors")
    assert ScaledProduct.apply(torch.ones(3), torch.ones(3), 2.0).tolist() == [2.0, 2.0, 2.0]
    raises(RuntimeError, ScaledProduct, contains="Legacy autograd function")
    out = F.relu(ScaledProduct.apply(x, x, 1.0))
    out.sum().backward()
    close(x.grad, torch.full((4, 3), 2.0), "the runtime stays usable after the errors")


def test_post_accumulate_grad_hooks_run_after_backward_accumulated_into_the_leaf():
    w = dtorch.distribute_tensor(torch.ones(4, 2), MESH, [Shard(0)]).requires_grad_(True)
    seen = []

    def step(param):
        assert param is w, "the hook gets the leaf itself"
        seen.append(param.grad.full_tensor().sum().item())
        with torch.no_grad():
            param.add_(param.grad * -0.5)  # an optimizer step inside the backward, as optimizer-in-backward does
        param.grad = None

    handle = w.register_post_accumulate_grad_hook(step)
    (w * 3).sum().backward()
    assert seen == [24.0] and w.grad is None, (seen, w.grad)
    close(w, torch.full((4, 2), -0.5), "stepped in the hook")
    torch.autograd.grad((w * 2).sum(), [w])
    assert seen == [24.0], "torch.autograd.grad accumulates nothing, so no hook runs"
    handle.remove()
    (w * 3).sum().backward()
    assert seen == [24.0] and w.grad is not None
    raises(RuntimeError, (w * 2).register_post_accumulate_grad_hook, step, contains="non-leaf tensors")
    raises(RuntimeError, dtorch.distribute_tensor(torch.ones(4), MESH, [Shard(0)]).register_post_accumulate_grad_hook, step,
           contains="doesn't require gradient")


def test_module_backward_hooks_see_and_replace_the_gradients_of_its_inputs_and_outputs():
    import torch.nn as nn
    torch.manual_seed(3)
    plain = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    x = torch.randn(8, 4)
    xt = x.clone().requires_grad_(True)
    first = plain[0](xt)
    first.retain_grad()
    (plain[2](plain[1](first)) ** 2).sum().backward()
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    model.load_state_dict(plain.state_dict())
    dtorch.distribute_module(model, MESH)
    seen = {}

    def hook(module, grad_input, grad_output):
        seen["in"], seen["out"] = grad_input, grad_output

    handle = model[0].register_full_backward_hook(hook)
    dx = dtorch.distribute_tensor(x, MESH, [Shard(0)]).requires_grad_(True)
    (model(dx) ** 2).sum().backward()
    assert len(seen["in"]) == 1 and len(seen["out"]) == 1
    close(seen["out"][0], first.grad, "grad_output: the gradient of the first layer's output")
    close(seen["in"][0], xt.grad, "grad_input: the gradient of its input")
    close(dx.grad, xt.grad, "the input's gradient, unchanged by a hook that returns None")
    handle.remove()
    doubling = model[0].register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))
    dx.grad = None
    (model(dx) ** 2).sum().backward()
    close(dx.grad, xt.grad * 2, "a hook's grad_input replaces the input's gradient")
    doubling.remove()
    model.zero_grad()
    dx.grad = None
    model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 0,))
    (model(dx) ** 2).sum().backward()
    close(dx.grad, torch.zeros(8, 4), "a pre-hook's grad_output flows on")
    close(model[0].weight.grad, torch.zeros(3, 4), "into every layer below")
    calls = []
    model[0].register_full_backward_hook(lambda m, gi, go: calls.append((gi, go)))
    (model(dtorch.distribute_tensor(x, MESH, [Shard(0)])) ** 2).sum().backward()  # an input without grad
    assert len(calls) == 1 and calls[0][0] == (None,) and calls[0][1][0] is not None, calls
    local = nn.Linear(4, 3)
    local.register_full_backward_hook(hook)
    raises(RuntimeError, local, torch.ones(2, 4, requires_grad=True), contains="full backward hooks, which run on distributed")


run(globals())
