"""The grad-mode switches: context managers that also decorate functions, over libtorch's thread-local modes.

no_grad and enable_grad switch recording off and on; set_grad_enabled(mode) switches at once (and back at the end of
its with block); inference_mode is libtorch's inference mode, which also skips the version counting of the tensors it
makes (they cannot enter a recorded graph later). Each applies to the thread that enters it, and is left on that thread.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from .. import _autograd

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]


def is_grad_enabled() -> bool:
    """True when operators on this thread record for autograd."""
    return bool(_autograd.JAVA.isGradEnabled())


def is_inference_mode_enabled() -> bool:
    """True inside inference_mode on this thread."""
    return bool(_autograd.JAVA.isInferenceModeEnabled())


def _set_grad_enabled(mode: bool) -> None:
    _autograd.JAVA.setGradEnabled(bool(mode))


class _DecoratorContextManager:
    """A context manager that decorates a function too: each call of the function runs in a fresh copy of it."""

    def clone(self) -> Any:
        return self.__class__()

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isclass(fn):
            raise RuntimeError("%s cannot decorate a class; decorate its methods instead" % type(self).__name__)
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args: Any, **kwargs: Any) -> Any:
                # The mode holds while the generator runs, not while its caller does between two values.
                gen = fn(*args, **kwargs)
                try:
                    with self.clone():
                        request = gen.send(None)
                    while True:
                        try:
                            response = yield request
                        except GeneratorExit:
                            with self.clone():
                                gen.close()
                            raise
                        except BaseException as e:  # noqa: B902 - handed to the generator, as Python does
                            with self.clone():
                                request = gen.throw(e)
                        else:
                            with self.clone():
                                request = gen.send(response)
                except StopIteration as e:
                    return e.value
            return generator

        @functools.wraps(fn)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return fn(*args, **kwargs)
        return decorated


class _NoParamDecorator(_DecoratorContextManager):
    """Usable as @no_grad() and as @no_grad alike."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecorator):
    """Operators record nothing for autograd inside it (their results do not require grad), on this thread."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = is_grad_enabled()
        _set_grad_enabled(False)

    def __exit__(self, *exc: Any) -> None:
        _set_grad_enabled(self.prev)


class enable_grad(_NoParamDecorator):
    """Operators record for autograd inside it, even within no_grad, on this thread."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = is_grad_enabled()
        _set_grad_enabled(True)

    def __exit__(self, *exc: Any) -> None:
        _set_grad_enabled(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """set_grad_enabled(mode) switches recording at once, as a function; as a context manager it switches back at the
    end of the with block; as a decorator it switches for each call of the function only."""

    def __init__(self, mode: bool) -> None:
        self.prev = is_grad_enabled()
        self.mode = bool(mode)
        _set_grad_enabled(self.mode)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        _set_grad_enabled(self.prev)
        return super().__call__(fn)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _set_grad_enabled(self.prev)

    def clone(self) -> set_grad_enabled:
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """libtorch's inference mode (mode=True): no recording, and the tensors made inside are inference tensors that a
    recorded graph refuses later. inference_mode(False) inside it switches it off for a nested block."""

    def __new__(cls, mode_or_orig_func: Any = True) -> Any:
        if isinstance(mode_or_orig_func, bool):
            return super().__new__(cls)
        return cls()(mode_or_orig_func)

    def __init__(self, mode: bool = True) -> None:
        self.mode = mode
        self._scopes: list = []

    def __enter__(self) -> None:
        self._scopes.append(_autograd.call(_autograd.JAVA.enterInferenceMode, bool(self.mode)))

    def __exit__(self, *exc: Any) -> None:
        _autograd.call(self._scopes.pop().close)

    def clone(self) -> inference_mode:
        return self.__class__(self.mode)
