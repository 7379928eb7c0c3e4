"""The torch module: libtorch's operators by name through the dispatcher, PyTorch's argument binding, and the
hand-written parts (dtypes, tensor(), indexing, printing, testing.assert_close)."""

import math

import torch
import torch.nn.functional as F
from _testing import raises, run, close


def test_overloads_follow_the_argument_kinds():
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([10.0, 20.0, 30.0])
    assert torch.add(a, b).tolist() == [11.0, 22.0, 33.0]          # add.Tensor
    assert torch.add(a, 1).tolist() == [2.0, 3.0, 4.0]             # add.Scalar
    assert torch.add(a, b, alpha=2).tolist() == [21.0, 42.0, 63.0]  # keyword-only alpha
    assert torch.max(a).item() == 3.0                               # max()
    assert torch.max(a, b).tolist() == [10.0, 20.0, 30.0]           # max.other
    values, indices = torch.max(torch.tensor([[1, 5], [7, 2]]), 1)  # max.dim: two returns with names
    assert values.tolist() == [5, 7] and indices.tolist() == [1, 0]
    assert torch.max(torch.tensor([[1, 5], [7, 2]]), dim=0).indices.tolist() == [1, 0]
    assert torch.where(a > 1.5, a, 0.0).tolist() == [0.0, 2.0, 3.0]  # where.ScalarOther
    assert torch.pow(a, 2).tolist() == [1.0, 4.0, 9.0] and torch.pow(2, a).tolist() == [2.0, 4.0, 8.0]


def test_defaults_and_keywords_come_from_the_schema():
    x = torch.arange(6).reshape(2, 3)
    assert x.sum().item() == 15
    assert x.sum(0).tolist() == [3, 5, 7]                 # an int where int[1]? dim goes
    assert x.sum(dim=1, keepdim=True).tolist() == [[3], [12]]
    assert x.sum(dim=(0, 1)).item() == 15
    assert x.sum(1, dtype=torch.float64).dtype == torch.float64
    assert torch.softmax(torch.zeros(2, 4), -1).tolist() == [[0.25] * 4] * 2
    assert x.view(3, 2).shape == (3, 2) and x.view(-1).shape == (6,) and x.reshape((6,)).shape == (6,)  # varargs
    assert x.permute(1, 0).shape == (3, 2) and x.transpose(0, 1).shape == (3, 2)
    assert torch.zeros(2, 3).shape == torch.Size([2, 3]) and torch.zeros((2, 3)).shape == (2, 3)
    assert x.flatten().tolist() == [0, 1, 2, 3, 4, 5]
    assert [c.tolist() for c in x.split(1)] == [[[0, 1, 2]], [[3, 4, 5]]]  # a list of tensors back
    assert torch.cat([x, x], dim=0).shape == (4, 3) and torch.stack([x, x]).shape == (2, 2, 3)


def test_dtype_promotion_follows_torch():
    i = torch.tensor([1, 2, 3])
    assert i.dtype == torch.int64
    assert (i + 1).dtype == torch.int64
    assert (i + 1.5).dtype == torch.float32
    assert (i / 2).dtype == torch.float32 and (i / 2).tolist() == [0.5, 1.0, 1.5]
    assert (i * True).dtype == torch.int64
    assert (torch.ones(2, dtype=torch.float16) + torch.ones(2, dtype=torch.float32)).dtype == torch.float32
    assert (torch.ones(2, dtype=torch.bfloat16) * 2).dtype == torch.bfloat16
    assert (i > 1).dtype == torch.bool and (i > 1).tolist() == [False, True, True]
    assert torch.tensor([2 ** 62 + 1]).add(0).tolist() == [2 ** 62 + 1]   # exact int64
    assert torch.full((2,), 7).dtype == torch.int64 and torch.full((2,), 7.0).dtype == torch.float32
    assert torch.arange(3).dtype == torch.int64 and torch.arange(0.0, 1.0, 0.5).tolist() == [0.0, 0.5]
    assert torch.tensor([True, False]).dtype == torch.bool
    assert torch.zeros(2, dtype=torch.int32).dtype == torch.int32 and torch.int32.itemsize == 4
    assert i.float().dtype == torch.float32 and i.to(torch.float64).dtype == torch.float64


def test_indexing_and_slicing():
    x = torch.arange(24).reshape(4, 6)
    assert x[1].tolist() == [6, 7, 8, 9, 10, 11]
    assert x[-1, -1].item() == 23
    assert x[1:3, 2:5].tolist() == [[8, 9, 10], [14, 15, 16]]
    assert x[::2, ::3].tolist() == [[0, 3], [12, 15]]
    assert x[..., 0].tolist() == [0, 6, 12, 18]
    assert x[None].shape == (1, 4, 6) and x[:, None].shape == (4, 1, 6)
    assert x[torch.tensor([0, 2])].shape == (2, 6)
    assert x[x > 20].tolist() == [21, 22, 23]
    assert x[[1, 3], 0].tolist() == [6, 18]
    raises(IndexError, lambda: x[4], contains="out of bounds")
    raises(IndexError, lambda: x[0, 0, 0], contains="too many indices")


def test_setitem_writes_through_views():
    x = torch.zeros(3, 4)
    x[0] = 1.0
    x[1, 1:3] = torch.tensor([5.0, 6.0])
    x[:, 3] = 9
    x[x == 6.0] = -1.0
    assert x.tolist() == [[1.0, 1.0, 1.0, 9.0], [0.0, 5.0, -1.0, 9.0], [0.0, 0.0, 0.0, 9.0]]


def test_in_place_operators_keep_the_object():
    x = torch.ones(3)
    same = x
    x += 1
    x *= torch.tensor([1.0, 2.0, 3.0])
    x -= 0.5
    x /= 2
    assert x is same and x.tolist() == [0.75, 1.75, 2.75]
    y = x.add_(1)
    assert y is x and x.tolist() == [1.75, 2.75, 3.75]
    x.zero_()
    assert x.tolist() == [0.0, 0.0, 0.0]
    x.clamp_(min=1.0)
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_python_operators():
    a = torch.tensor([1.0, -2.0, 3.0])
    b = torch.tensor([2.0, 2.0, 2.0])
    assert (a - b).tolist() == [-1.0, -4.0, 1.0] and (1 - a).tolist() == [0.0, 3.0, -2.0]
    assert (a * b).tolist() == [2.0, -4.0, 6.0] and (a / b).tolist() == [0.5, -1.0, 1.5]
    assert (2 / b).tolist() == [1.0, 1.0, 1.0] and (a ** 2).tolist() == [1.0, 4.0, 9.0]
    assert (-a).tolist() == [-1.0, 2.0, -3.0] and abs(a).tolist() == [1.0, 2.0, 3.0]
    assert (a @ b).item() == 4.0
    assert (a < b).tolist() == [True, True, False] and (a == b).tolist() == [False, False, False]
    assert (a >= 1).tolist() == [True, False, True] and (a != 3.0).tolist() == [True, True, False]
    m = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert (m @ m.T).tolist() == [[5.0, 14.0], [14.0, 50.0]]
    assert bool(torch.tensor([1.0]) > 0) and float(torch.tensor(2.5)) == 2.5 and int(torch.tensor(7)) == 7
    assert len(m) == 2 and [r.tolist() for r in m] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    raises(RuntimeError, bool, m, contains="ambiguous")


def test_bad_arguments_raise_type_error_naming_the_schemas():
    a = torch.ones(2)
    e = raises(TypeError, torch.add, a, "text", contains="aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)")
    assert "(Tensor, str)" in str(e) and "aten::add.Scalar" in str(e)
    raises(TypeError, torch.add, a, a, beta=2, contains="beta=int")
    raises(TypeError, a.sum, 1.5, contains="aten::sum")
    raises(TypeError, torch.softmax, a, contains="aten::softmax")


def test_missing_operators_raise_attribute_error_naming_them():
    raises(AttributeError, lambda: torch.no_such_operator, contains="no_such_operator")
    raises(AttributeError, lambda: torch.ones(1).no_such_method, contains="no_such_method")
    raises(AttributeError, lambda: F.no_such_function, contains="no_such_function")
    assert not hasattr(torch, "frobnicate")


def test_libtorch_errors_are_runtime_errors_with_its_message():
    e = raises(RuntimeError, torch.add, torch.ones(2), torch.ones(3), contains="size of tensor a (2)")
    assert "Exception raised from" not in str(e)
    raises(RuntimeError, torch.matmul, torch.ones(2, 3), torch.ones(2, 3))


def test_functional():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    w = torch.ones(8)
    b = torch.zeros(8)
    y = F.layer_norm(x, (8,), w, b, 1e-5)
    close(y.mean(-1).tolist(), [[0.0] * 5] * 2, 1e-5)
    close(F.softmax(x, dim=-1).sum(-1).tolist(), [[1.0] * 5] * 2)
    assert F.relu(torch.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    close(F.gelu(torch.tensor([1.0])).item(), 0.8413447, 1e-5)
    close(F.gelu(torch.tensor([1.0]), approximate="tanh").item(), 0.8411920, 1e-5)
    emb = F.embedding(torch.tensor([[0, 2], [1, 1]]), torch.arange(12, dtype=torch.float32).reshape(3, 4))
    assert emb.shape == (2, 2, 4) and emb[0, 1].tolist() == [8.0, 9.0, 10.0, 11.0]
    img = torch.ones(1, 1, 4, 4)
    k = torch.ones(2, 1, 3, 3)
    assert F.conv2d(img, k).shape == (1, 2, 2, 2) and F.conv2d(img, k).flatten()[0].item() == 9.0
    assert F.conv2d(img, k, stride=2, padding=1).shape == (1, 2, 2, 2)
    assert F.conv2d(img, k, padding="same").shape == (1, 2, 4, 4)
    q = torch.randn(2, 4, 6, 8)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    manual = torch.softmax((q @ q.transpose(-2, -1) / math.sqrt(8)).masked_fill(
        torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf")), -1) @ q
    torch.testing.assert_close(out, manual, rtol=1e-4, atol=1e-5)
    assert F.linear(torch.ones(2, 3), torch.ones(4, 3)).tolist() == [[3.0] * 4] * 2
    assert F.dropout(torch.ones(4), p=0.5, training=False).tolist() == [1.0] * 4
    assert F.mse_loss(torch.ones(3), torch.zeros(3)).item() == 1.0
    close(F.cross_entropy(torch.zeros(2, 4), torch.tensor([0, 3])).item(), math.log(4))
    assert F.pad(torch.ones(2), (1, 1)).tolist() == [0.0, 1.0, 1.0, 0.0]
    assert F.max_pool2d(torch.arange(16.0).reshape(1, 1, 4, 4), 2).flatten().tolist() == [5.0, 7.0, 13.0, 15.0]


def test_factories_and_values():
    torch.manual_seed(3)
    r1 = torch.rand(4).tolist()
    torch.manual_seed(3)
    assert torch.rand(4).tolist() == r1 and all(0.0 <= v < 1.0 for v in r1)
    assert torch.ones(2, 2, dtype=torch.float64).dtype == torch.float64
    assert torch.empty(3).shape == (3,) and torch.full((2, 2), 1.5).tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert torch.zeros_like(torch.ones(2, dtype=torch.int32)).tolist() == [0, 0]
    assert torch.tensor(3).dim() == 0 and torch.tensor(3).item() == 3 and torch.tensor([]).shape == (0,)
    assert torch.tensor([[1, 2]], dtype=torch.float32).tolist() == [[1.0, 2.0]]
    assert torch.tensor(torch.tensor([1, 2])).tolist() == [1, 2]
    assert torch.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]] and torch.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    raises(OverflowError, torch.tensor, [2 ** 64])
    assert torch.ones(2, requires_grad=True).requires_grad and not torch.ones(2).requires_grad
    raises(RuntimeError, torch.ones, 2, dtype=torch.int64, requires_grad=True, contains="floating point")
    raises(ValueError, torch.tensor, [[1, 2], [3]], contains="rectangular")
    t = torch.tensor([1.5, 2.5])
    assert t.numel() == 2 and t.ndim == 1 and t.dim() == 1 and t.size() == (2,) and t.size(0) == 2 and t.nbytes == 8
    assert t.device == torch.device("cpu") and str(t.device) == "cpu" and not t.is_cuda
    assert torch.is_tensor(t) and not torch.is_tensor([1]) and t.is_floating_point()
    assert torch.tensor([True]).tolist() == [True] and torch.tensor([1, 2]).tolist() == [1, 2]


def test_repr_without_numpy():
    assert repr(torch.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(torch.tensor([1.5, -2.25])) == "tensor([ 1.5000, -2.2500])"
    assert repr(torch.tensor([[1, 2], [3, 4]])) == "tensor([[1, 2],\n        [3, 4]])"
    assert repr(torch.tensor(2.5)) == "tensor(2.5000)"
    assert repr(torch.tensor([1, 2], dtype=torch.int32)) == "tensor([1, 2], dtype=torch.int32)"
    assert repr(torch.tensor([True, False])) == "tensor([ True, False])"
    assert repr(torch.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(torch.Size([2, 3])) == "torch.Size([2, 3])" and repr(torch.float16) == "torch.float16"
    big = repr(torch.arange(5000))
    assert big.startswith("tensor([   0,    1,    2,  ...") and big.endswith("4997, 4998, 4999])"), big


def test_module_level_names():
    with torch.no_grad():
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    assert torch.cuda.is_available() in (True, False) and torch.cuda.device_count() >= 0
    assert torch.allclose(torch.ones(2), torch.ones(2) + 1e-9)
    torch.testing.assert_close(torch.ones(2), torch.ones(2))
    raises(AssertionError, torch.testing.assert_close, torch.ones(2), torch.zeros(2), contains="Mismatched elements: 2 / 2")
    raises(AssertionError, torch.testing.assert_close, torch.ones(2), torch.ones(2, dtype=torch.float64), contains="dtype")
    assert torch.float is torch.float32 and torch.long is torch.int64
    assert torch.device("cuda", 1) == torch.device("cuda:1") and torch.device("cuda:1").index == 1
    assert torch.layer_norm is torch.layer_norm and "aten::layer_norm" in torch.layer_norm.schemas()[0]


def test_host_tensor_api():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    view = t.memoryview()
    assert view.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert len(t.tobytes()) == 24 and t[:, 1].tobytes() == torch.tensor([1.0, 4.0]).tobytes()
    with torch.ones(3) as u:
        assert u.sum().item() == 3.0
    assert u.closed
    raises(RuntimeError, u.tolist, contains="closed")
    raises(RuntimeError, torch.add, u, u, contains="closed")


run(globals())
