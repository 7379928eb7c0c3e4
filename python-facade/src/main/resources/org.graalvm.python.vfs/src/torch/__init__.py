"""torch for DTorch's scripts: PyTorch's tensor API over libtorch in the JVM.

Every ATen operator is reachable by name (torch.add, torch.matmul, t.relu(), torch.nn.functional.softmax, ...): the
arguments are bound against the operator's schemas from libtorch's dispatcher, the way PyTorch's argument parser
binds them. Tensors stay in the JVM; a Python Tensor holds a handle to one. What is not an operator is written here:
dtypes, devices, Size, tensor(), indexing, printing, testing.assert_close, cuda.is_available, the optimizers
(torch.optim) and the modules (torch.nn). Gradients come from libtorch's autograd engine (torch.autograd): operators
record what backward needs as they run, in the thread's grad mode (no_grad, enable_grad, inference_mode).
"""

import builtins as _builtins
import typing as _typing

from ._types import (dtype, device, memory_format, Size, float32, float64, float16, bfloat16, complex64, complex128,
                     int64, int32, int16, int8, uint8, bool, contiguous_format, preserve_format, channels_last,
                     channels_last_3d)
from ._tensor import Tensor
from ._factories import (tensor, as_tensor, scalar_tensor, zeros, ones, empty, full, rand, randn, randint, randperm,
                         arange, linspace, eye, zeros_like, ones_like, empty_like, full_like, rand_like, randn_like)
from . import _autograd, _dispatch, _interop, autograd, cuda, nn, optim, testing
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                                 set_grad_enabled)

float = float32  # noqa: A001 - PyTorch's names
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

__version__ = "2.10.0+dtorch"

# This thread may have run an earlier script of the same JVM: it starts from a fresh thread's modes (grad mode on).
_autograd.JAVA.resetThread()


def is_tensor(obj: _typing.Any) -> _builtins.bool:
    return isinstance(obj, Tensor)


def is_floating_point(t: Tensor) -> _builtins.bool:
    return t.dtype.is_floating_point


def numel(t: Tensor) -> _builtins.int:
    return t.numel()


def manual_seed(seed: _builtins.int) -> None:
    """Seeds libtorch's generators: the same seed gives the same rand and randn."""
    _interop.call(_dispatch.JAVA.manualSeed, _builtins.int(seed))


def get_default_dtype() -> dtype:
    return float32


def allclose(input: Tensor, other: Tensor, rtol: _builtins.float = 1e-05, atol: _builtins.float = 1e-08,
             equal_nan: _builtins.bool = False) -> _builtins.bool:
    return _dispatch.require("allclose")(input, other, rtol, atol, equal_nan)


def einsum(equation: _builtins.str, *operands: _typing.Any, path: _typing.Any = None) -> Tensor:
    """torch.einsum(equation, *operands), the operands also as one list or tuple, as PyTorch takes them."""
    if len(operands) == 1 and isinstance(operands[0], (_builtins.list, _builtins.tuple)):
        operands = operands[0]
    return _dispatch.require("einsum")(equation, _builtins.list(operands), path=path)


def __getattr__(name):
    """Any other name is the ATen operator of that name (torch.add, torch.layer_norm, ...), found on first use."""
    op = _dispatch.op(name)
    if op is None:
        raise AttributeError("module 'torch' has no attribute %r (no aten::%s in libtorch's dispatcher either)"
                             % (name, name))
    globals()[name] = op
    return op
