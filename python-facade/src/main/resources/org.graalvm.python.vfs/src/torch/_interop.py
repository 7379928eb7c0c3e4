"""The one way from Python into Java, for the torch shim and for dtorch alike: the call wrapper that turns Java's
exceptions into Python's, the table of those exceptions, and the int64 bounds a Python int is checked against before
it crosses (Java would take a larger one as a double and round it silently).

The torch shim raises what PyTorch raises for the same mistake. dtorch raises the same types where the mistake is the
same, and its own where only the distributed runtime reports it (a placement an operator cannot take, a wait past its
deadline, a file an isolated script may not write).
"""

from __future__ import annotations

from typing import Any, Callable

import polyglot

ForeignException = polyglot.ForeignException

INT64_MIN = -(2 ** 63)
INT64_MAX = 2 ** 63 - 1

_PACKAGES = ("torch", "dtorch")

# The Python exception each package raises for a Java exception class. A name (a str) is one of the package's own
# types, which it binds when it makes its Errors (this module cannot import dtorch: dtorch imports torch). None leaves
# the message to the package's fallback.
#  Java class                                                torch                dtorch
_TABLE = (
    ("java.lang.IllegalArgumentException",                  ValueError,          ValueError),
    ("java.lang.ArithmeticException",                       ValueError,          ValueError),
    ("java.lang.IllegalStateException",                     RuntimeError,        RuntimeError),
    ("java.lang.UnsupportedOperationException",             NotImplementedError, NotImplementedError),
    ("java.lang.IndexOutOfBoundsException",                 IndexError,          IndexError),
    ("org.dtorch.polyglot.torch.ArgumentMismatchException", TypeError,           TypeError),
    ("org.dtorch.core.device.CudaUnavailableException",     RuntimeError,        None),
    ("java.lang.RuntimeException",                          RuntimeError,        None),
    ("org.dtorch.core.graph.ShardingException",             None,                "ShardingError"),
    ("java.util.concurrent.TimeoutException",              None,                TimeoutError),
    ("org.dtorch.core.communication.CommTimeoutException",  None,                TimeoutError),
    ("java.lang.SecurityException",                         None,                PermissionError),
    ("org.dtorch.core.safetensors.SafeTensorsException",    ValueError,          ValueError),
    ("java.io.UncheckedIOException",                        OSError,             OSError),
)

# libtorch appends where it raised an error, and sometimes a C++ backtrace: not the script's business.
_LIBTORCH_BACKTRACE = "\nException raised from"


class Errors:
    """Java's exceptions as one package's Python exceptions.

    A message "java.lang.X: text" whose class is in the package's column of the table becomes that type with the text.
    Any other becomes ``fallback``: of the whole message, or, with ``unwrap``, of the text of the outermost Java wrapper
    (a failed future wraps the original error), translated again first so that a wrapped known class keeps its type.
    With ``cut_backtrace`` the libtorch location and backtrace after a known class's text are cut.
    """

    def __init__(self, package: str, fallback: type[Exception], own: dict[str, type[Exception]] | None = None,
                 unwrap: bool = False, cut_backtrace: bool = False) -> None:
        column = _PACKAGES.index(package) + 1
        rows = []
        for row in _TABLE:
            python_type = row[column]
            if python_type is None:
                continue
            if isinstance(python_type, str):
                python_type = (own or {})[python_type]
            rows.append((row[0] + ":", python_type))
        self._rows: tuple[tuple[str, type[Exception]], ...] = tuple(rows)
        self._fallback = fallback
        self._unwrap = unwrap
        self._cut_backtrace = cut_backtrace

    def translate(self, message: str) -> Exception:
        """The Python exception for a Java exception's message, 'java.lang.X: text'."""
        for prefix, python_type in self._rows:
            if message.startswith(prefix):
                text = message[len(prefix):].strip()
                if self._cut_backtrace:
                    cut = text.find(_LIBTORCH_BACKTRACE)
                    if cut >= 0:
                        text = text[:cut].strip()
                return python_type(text)
        if self._unwrap:
            head, _, text = message.partition(": ")
            if head.startswith(("java.", "org.")) and text:
                nested = self.translate(text)
                if not isinstance(nested, self._fallback):
                    return nested
                return self._fallback(text)
        return self._fallback(message)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Calls a Java method, raising the Python exception for a Java one, with its message."""
        try:
            return fn(*args)
        except ForeignException as e:
            raise self.translate(str(e)) from None


TORCH = Errors("torch", RuntimeError, cut_backtrace=True)

call = TORCH.call
translate = TORCH.translate
