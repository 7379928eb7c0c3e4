"""torch for DTorch's scripts: PyTorch's tensor API over libtorch in the JVM.

Every ATen operator is reachable by name (torch.add, torch.matmul, t.relu(), torch.nn.functional.softmax, ...): the
arguments are bound against the operator's schemas from libtorch's dispatcher, the way PyTorch's argument parser
binds them. Tensors stay in the JVM; a Python Tensor holds a handle to one. What is not an operator is written here:
dtypes, devices, Size, tensor(), indexing, printing, no_grad, testing.assert_close, cuda.is_available.
"""

import builtins as _builtins
import typing as _typing

from ._types import (dtype, device, memory_format, Size, float32, float64, float16, bfloat16, complex64, complex128,
                     int64, int32, int16, int8, uint8, bool, contiguous_format, preserve_format, channels_last,
                     channels_last_3d)
from ._tensor import Tensor
from ._factories import (tensor, as_tensor, scalar_tensor, zeros, ones, empty, full, rand, randn, randint, randperm,
                         arange, linspace, eye, zeros_like, ones_like, empty_like, full_like, rand_like, randn_like)
from . import _dispatch, _interop, cuda, nn, testing

float = float32  # noqa: A001 - PyTorch's names
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

__version__ = "2.10.0+dtorch"


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


_GRAD_ENABLED = [True]


class no_grad:
    """A context manager (and decorator) for code that needs no gradients. This torch computes none, so it only
    records the state that is_grad_enabled() reports."""

    def __enter__(self) -> "no_grad":
        self._previous = _GRAD_ENABLED[0]
        _GRAD_ENABLED[0] = False
        return self

    def __exit__(self, *exc: _typing.Any) -> _builtins.bool:
        _GRAD_ENABLED[0] = self._previous
        return False

    def __call__(self, fn: _typing.Callable[..., _typing.Any]) -> _typing.Callable[..., _typing.Any]:
        def wrapped(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        wrapped.__name__ = getattr(fn, "__name__", "wrapped")
        return wrapped


inference_mode = no_grad


class enable_grad(no_grad):
    def __enter__(self) -> "enable_grad":
        self._previous = _GRAD_ENABLED[0]
        _GRAD_ENABLED[0] = True
        return self


class set_grad_enabled(no_grad):
    def __init__(self, mode: _builtins.bool) -> None:
        self._mode = _builtins.bool(mode)
        self._previous = _GRAD_ENABLED[0]
        _GRAD_ENABLED[0] = self._mode

    def __enter__(self) -> "set_grad_enabled":
        return self

    def __call__(self, fn: _typing.Callable[..., _typing.Any]) -> _typing.Callable[..., _typing.Any]:
        raise NotImplementedError("set_grad_enabled as a decorator is not supported")


def is_grad_enabled() -> _builtins.bool:
    return _GRAD_ENABLED[0]


def __getattr__(name):
    """Any other name is the ATen operator of that name (torch.add, torch.layer_norm, ...), found on first use."""
    op = _dispatch.op(name)
    if op is None:
        raise AttributeError("module 'torch' has no attribute %r (no aten::%s in libtorch's dispatcher either)"
                             % (name, name))
    globals()[name] = op
    return op
