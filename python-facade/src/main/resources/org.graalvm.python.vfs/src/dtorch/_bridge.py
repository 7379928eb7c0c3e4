"""The Java side of dtorch: the runtime's bridge, and Java errors turned into Python ones (torch._interop's table,
dtorch's column)."""

from __future__ import annotations

from typing import Any

import polyglot

from torch import _interop

_BRIDGE = None


class DTorchError(RuntimeError):
    """An error reported by the DTorch runtime (a failed operator, a communication failure)."""


class ShardingError(ValueError):
    """An operator cannot take its inputs' placements; the message lists the legal ones."""


def bridge() -> Any:
    """The bridge to the runtime the launcher (or the embedding Java program) started."""
    global _BRIDGE
    if _BRIDGE is None:
        _BRIDGE = polyglot.import_value("dtorch.bridge")
        if _BRIDGE is None:
            raise DTorchError("no DTorch runtime: run this script with './dtorch run script.py' "
                              "(or publish a PyBridge as the polyglot binding 'dtorch.bridge')")
    return _BRIDGE


# A Java error that is none of the table's is a DTorchError of the original error's text: a failed future wraps it.
_ERRORS = _interop.Errors("dtorch", DTorchError, own={"ShardingError": ShardingError}, unwrap=True)

# translate(message): the Python exception for a Java error message 'java.lang.X: text'.
translate = _ERRORS.translate
# call(fn, *args): calls a Java method, raising the Python exception for a Java one, with its message.
call = _ERRORS.call
