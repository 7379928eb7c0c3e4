"""Autograd on torch tensors: libtorch's engine through the shim (requires_grad, backward, .grad, grad_fn, is_leaf,
torch.autograd.grad, the grad-mode switches and their thread-locality), and the gradients of torch.nn layers checked
against their closed forms, computed without autograd."""

import threading

import torch
import torch.nn as nn
import torch.nn.functional as F
from _testing import raises, run

DEADLINE_S = 60.0


def near(a, b, what, atol=1e-5):
    assert a.shape == b.shape, "%s: shape %s vs %s" % (what, tuple(a.shape), tuple(b.shape))
    assert torch.allclose(a, b, atol=atol, rtol=1e-4), "%s:\n%r\nvs\n%r" % (what, a, b)


def test_requires_grad_comes_from_factories_tensor_and_requires_grad_():
    assert torch.zeros(2, requires_grad=True).requires_grad and torch.randn(2, 3, requires_grad=True).requires_grad
    assert torch.tensor([1.0, 2.0], requires_grad=True).requires_grad and not torch.tensor([1.0]).requires_grad
    t = torch.ones(3)
    assert t.requires_grad_() is t and t.requires_grad and t.is_leaf and t.grad_fn is None and t.grad is None
    t.requires_grad = False
    assert not t.requires_grad
    raises(RuntimeError, torch.tensor, [1, 2], requires_grad=True, contains="floating point")
    raises(RuntimeError, torch.arange(3).requires_grad_, contains="floating point")
    assert repr(torch.tensor([1.0, 2.0], requires_grad=True)) == "tensor([1., 2.], requires_grad=True)"
    copied = torch.tensor(torch.ones(2, requires_grad=True) * 2)
    assert not copied.requires_grad and copied.is_leaf, "torch.tensor(t) copies the values, not the history"


def test_backward_fills_grad_of_leaves_and_accumulates():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    assert y.grad_fn.name() == "SumBackward0" and not y.is_leaf and y.requires_grad
    assert repr(y) == "tensor(14., grad_fn=<SumBackward0>)"
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0], "a second backward adds to .grad"
    x.grad.zero_()
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0], "grad is the same tensor each time: zero_() on it reaches the next pass"
    x.grad = None
    assert x.grad is None
    x.grad = torch.ones(3)
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    del x.grad
    assert x.grad is None
    raises(RuntimeError, setattr, x, "grad", torch.ones(4), contains="different size")
    raises(RuntimeError, setattr, x, "grad", torch.ones(3, dtype=torch.float64), contains="different type")
    raises(TypeError, setattr, x, "grad", [1.0, 2.0, 3.0], contains="Tensor or None")


def test_backward_takes_a_gradient_for_a_non_scalar_and_retains_the_graph_when_asked():
    x = torch.tensor([1.0, -1.0, 2.0], requires_grad=True)
    y = x * x * 3
    raises(RuntimeError, y.backward, contains="implicitly created only for scalar outputs")
    y.backward(torch.tensor([1.0, 2.0, 3.0]), retain_graph=True)
    assert x.grad.tolist() == [6.0, -12.0, 36.0], "6 x times the given gradient"
    y.backward(gradient=torch.ones(3))
    assert x.grad.tolist() == [12.0, -18.0, 48.0]
    raises(RuntimeError, y.backward, torch.ones(3), contains="backward through the graph a second time")
    raises(RuntimeError, torch.ones(2).sum().backward, contains="does not require grad")


def test_backward_with_inputs_accumulates_into_those_only():
    a = torch.tensor([2.0], requires_grad=True)
    b = torch.tensor([3.0], requires_grad=True)
    (a * b).sum().backward(inputs=[a])
    assert a.grad.tolist() == [3.0] and b.grad is None
    torch.autograd.backward([(a * a).sum(), (b * 2).sum()])
    assert a.grad.tolist() == [7.0] and b.grad.tolist() == [2.0]


def test_autograd_grad_returns_gradients_without_accumulating():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    z = torch.tensor([5.0], requires_grad=True)
    y = (x ** 3).sum()
    gx, = torch.autograd.grad(y, x, create_graph=True)
    assert gx.tolist() == [3.0, 12.0] and x.grad is None and gx.requires_grad
    ggx, = torch.autograd.grad(gx.sum(), [x])
    assert ggx.tolist() == [6.0, 12.0], "the second derivative through the recorded backward pass"
    v = x * 2
    gv, = torch.autograd.grad([v], [x], grad_outputs=[torch.tensor([1.0, 10.0])], retain_graph=True)
    assert gv.tolist() == [2.0, 20.0]
    raises(RuntimeError, torch.autograd.grad, v.sum(), [x, z], contains="not have been used in the graph")
    gx2, gz = torch.autograd.grad(v.sum(), [x, z], allow_unused=True, retain_graph=True)
    assert gx2.tolist() == [2.0, 2.0] and gz is None
    _, gz0 = torch.autograd.grad(v.sum(), [x, z], materialize_grads=True)
    assert gz0.tolist() == [0.0]


def test_detach_data_and_retain_grad():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.tolist() == [2.0, 4.0]
    d.add_(1.0)
    assert y.tolist() == [3.0, 5.0], "detach shares the memory"
    w = x * 3
    assert w.detach_() is w and not w.requires_grad and w.grad_fn is None
    plain = x.data
    assert not plain.requires_grad
    plain.mul_(10.0)
    assert x.tolist() == [10.0, 20.0] and x.requires_grad, ".data is the same memory, without the tracking"
    h = x * 1.0
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    assert h.grad.tolist() == [20.0, 40.0] and x.grad.tolist() == [20.0, 40.0]
    x.data = torch.tensor([1.0, 1.0, 1.0])
    assert x.shape == (3,) and x.requires_grad and x.is_leaf, "t.data = u keeps the tensor and its requires_grad"


def test_no_grad_enable_grad_and_set_grad_enabled_stop_and_start_recording():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        assert not torch.is_grad_enabled()
        y = x * 2
        with torch.enable_grad():
            assert torch.is_grad_enabled() and (x * 2).requires_grad
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled() and not y.requires_grad and y.grad_fn is None

    @torch.no_grad()
    def called():
        return x * 2, torch.is_grad_enabled()

    @torch.no_grad
    def bare():
        return x * 2

    out, enabled = called()
    assert not out.requires_grad and not enabled and not bare().requires_grad and torch.is_grad_enabled()
    assert called.__name__ == "called"

    torch.set_grad_enabled(False)
    assert not torch.is_grad_enabled() and not (x * 2).requires_grad
    torch.set_grad_enabled(True)
    with torch.set_grad_enabled(False):
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()

    @torch.set_grad_enabled(False)
    def decorated():
        return torch.is_grad_enabled()

    assert torch.is_grad_enabled() and decorated() is False and torch.is_grad_enabled()

    @torch.no_grad()
    def generator():
        yield torch.is_grad_enabled()
        yield torch.is_grad_enabled()

    assert list(generator()) == [False, False] and torch.is_grad_enabled()
    try:
        with torch.no_grad():
            raise KeyError("leaves through an exception")
    except KeyError:
        pass
    assert torch.is_grad_enabled(), "no_grad restores the mode when its block raises"


def test_inference_mode_makes_inference_tensors_that_autograd_refuses_later():
    x = torch.ones(2, requires_grad=True)
    with torch.inference_mode():
        assert torch.is_inference_mode_enabled() and not torch.is_grad_enabled()
        t = torch.ones(2) * 3
        assert not (x * 2).requires_grad
        with torch.inference_mode(False):
            assert not torch.is_inference_mode_enabled()
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
    assert t.is_inference() and not x.is_inference()
    raises(RuntimeError, lambda: (x * t).sum().backward(), contains="Inference tensors")

    @torch.inference_mode
    def bare():
        return torch.is_inference_mode_enabled()

    @torch.inference_mode()
    def called():
        return torch.is_inference_mode_enabled()

    assert bare() and called() and not torch.is_inference_mode_enabled()


def _wait(event, what):
    if not event.wait(DEADLINE_S):
        raise AssertionError("no %s within %.0f s" % (what, DEADLINE_S))


def test_grad_mode_belongs_to_the_thread_that_sets_it():
    x = torch.tensor([2.0], requires_grad=True)
    main_in_no_grad = threading.Event()
    worker_done = threading.Event()
    seen = {}

    def worker():
        try:
            _wait(main_in_no_grad, "no_grad on the main thread")
            seen["enabled"] = torch.is_grad_enabled()
            y = (x * x).sum()
            seen["recorded"] = y.requires_grad
            gx, = torch.autograd.grad(y, x)
            seen["grad"] = gx.tolist()
            with torch.no_grad():
                seen["inner"] = torch.is_grad_enabled()
        except BaseException as e:  # noqa: B902 - reported by the main thread
            seen["error"] = e
        finally:
            worker_done.set()

    thread = threading.Thread(target=worker)
    with torch.no_grad():
        thread.start()  # a thread started inside no_grad starts with grad mode on, as in PyTorch
        main_in_no_grad.set()
        _wait(worker_done, "the worker thread's backward pass")
        assert not torch.is_grad_enabled(), "the worker's no_grad block did not reach this thread"
    thread.join(DEADLINE_S)
    assert "error" not in seen, seen.get("error")
    assert seen == {"enabled": True, "recorded": True, "grad": [4.0], "inner": False}, seen
    assert torch.is_grad_enabled()


def test_linear_gradients_match_the_closed_form():
    torch.manual_seed(11)
    lin = nn.Linear(4, 3)
    x = torch.randn(5, 4, requires_grad=True)
    g = torch.randn(5, 3)
    (lin(x) * g).sum().backward()
    with torch.no_grad():
        near(lin.weight.grad, g.t() @ x, "dL/dW = g^T x")
        near(lin.bias.grad, g.sum(0), "dL/db = sum of g")
        near(x.grad, g @ lin.weight, "dL/dx = g W")


def test_losses_have_their_closed_form_gradients():
    torch.manual_seed(12)
    logits = torch.randn(4, 5, requires_grad=True)
    target = torch.tensor([0, 3, 1, 4])
    F.cross_entropy(logits, target).backward()
    with torch.no_grad():
        expected = (F.softmax(logits, dim=1) - F.one_hot(target, 5).float()) / 4
    near(logits.grad, expected, "cross_entropy: (softmax - one_hot) / N")
    pred = torch.randn(3, 2, requires_grad=True)
    truth = torch.randn(3, 2)
    F.mse_loss(pred, truth).backward()
    with torch.no_grad():
        near(pred.grad, 2 * (pred - truth) / 6, "mse_loss: 2 (x - y) / N")
    pred.grad = None
    F.mse_loss(pred, truth, reduction="sum").backward()
    with torch.no_grad():
        near(pred.grad, 2 * (pred - truth), "mse_loss sum: 2 (x - y)")


def test_embedding_norms_and_conv2d_gradients_match_the_closed_form():
    torch.manual_seed(13)
    emb = nn.Embedding(6, 3)
    ids = torch.tensor([[1, 4, 1]])
    g = torch.randn(1, 3, 3)
    (emb(ids) * g).sum().backward()
    expected = torch.zeros(6, 3)
    expected[1] = g[0, 0] + g[0, 2]
    expected[4] = g[0, 1]
    near(emb.weight.grad, expected, "embedding: the rows' gradients summed per id")

    x = torch.randn(4, 5)
    g = torch.randn(4, 5)
    ln = nn.LayerNorm(5)
    (ln(x) * g).sum().backward()
    with torch.no_grad():
        normalized = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    near(ln.weight.grad, (normalized * g).sum(0), "LayerNorm weight: sum of normalized x times g", atol=1e-4)
    near(ln.bias.grad, g.sum(0), "LayerNorm bias: sum of g")

    rms = nn.RMSNorm(5, eps=1e-6)
    (rms(x) * g).sum().backward()
    with torch.no_grad():
        scaled = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    near(rms.weight.grad, (scaled * g).sum(0), "RMSNorm weight: sum of x / rms(x) times g", atol=1e-4)

    conv = nn.Conv2d(2, 3, 2)
    image = torch.randn(2, 2, 4, 4)
    g = torch.randn(2, 3, 3, 3)
    (conv(image) * g).sum().backward()
    expected = torch.zeros(3, 2, 2, 2)
    for kh in range(2):
        for kw in range(2):
            patch = image[:, :, kh:kh + 3, kw:kw + 3]
            expected[:, :, kh, kw] = torch.einsum("nohw,nihw->oi", [g, patch])
    near(conv.weight.grad, expected, "Conv2d weight: g correlated with the shifted input", atol=1e-4)
    near(conv.bias.grad, g.sum((0, 2, 3)), "Conv2d bias: sum of g per channel")


def test_every_parameter_of_a_model_gets_a_gradient_and_zero_grad_clears_them():
    torch.manual_seed(14)
    model = nn.Sequential(nn.Embedding(10, 8), nn.LayerNorm(8), nn.Linear(8, 8), nn.GELU(), nn.RMSNorm(8),
                          nn.Linear(8, 4))
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    loss = F.cross_entropy(model(ids).reshape(6, 4), torch.tensor([0, 1, 2, 3, 0, 1]))
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name
        assert p.grad.abs().sum().item() > 0, "%s got a zero gradient" % name
    model.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model[0].requires_grad_(False)
    F.cross_entropy(model(ids).reshape(6, 4), torch.tensor([0, 1, 2, 3, 0, 1])).backward()
    assert model[0].weight.grad is None and model[2].weight.grad is not None, "a frozen layer gets no gradient"


def test_parameters_are_leaves_of_their_own_and_module_conversions_keep_them():
    t = torch.ones(2, 2)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf and not t.requires_grad, "the Parameter requires grad, not its data"
    with torch.no_grad():
        t.add_(1.0)
    assert p.tolist() == [[2.0, 2.0], [2.0, 2.0]], "and shares its memory"
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor([[2., 2.],") and repr(p).endswith("requires_grad=True)")
    lin = nn.Linear(2, 2)
    weight = lin.weight
    (lin(torch.ones(1, 2))).sum().backward()
    lin.double()
    assert lin.weight is weight and weight.dtype == torch.float64 and weight.requires_grad and weight.is_leaf
    assert weight.grad.dtype == torch.float64, "a conversion converts the gradient too"
    state = lin.state_dict()
    assert not state["weight"].requires_grad


run(globals())
