"""The Java side of dtorch: the runtime's bridge, and Java errors turned into Python ones."""

import polyglot

_BRIDGE = None


class DTorchError(RuntimeError):
    """An error reported by the DTorch runtime (a failed operator, a communication failure)."""


class ShardingError(ValueError):
    """An operator cannot take its inputs' placements; the message lists the legal ones."""


def bridge():
    """The bridge to the runtime the launcher (or the embedding Java program) started."""
    global _BRIDGE
    if _BRIDGE is None:
        _BRIDGE = polyglot.import_value("dtorch.bridge")
        if _BRIDGE is None:
            raise DTorchError("no DTorch runtime: run this script with './dtorch run script.py' "
                              "(or publish a PyBridge as the polyglot binding 'dtorch.bridge')")
    return _BRIDGE


_JAVA_TO_PYTHON = (
    ("org.dtorch.core.graph.ShardingException", ShardingError),
    ("java.util.concurrent.TimeoutException", TimeoutError),
    ("org.dtorch.core.communication.CommTimeoutException", TimeoutError),
    ("java.lang.IllegalArgumentException", ValueError),
    ("java.lang.IllegalStateException", RuntimeError),
    ("java.lang.UnsupportedOperationException", NotImplementedError),
    ("java.lang.ArithmeticException", ValueError),
    ("java.lang.IndexOutOfBoundsException", IndexError),
    ("java.lang.SecurityException", PermissionError),
)


def translate(message):
    """The Python exception for a Java error message 'java.lang.X: text'."""
    for java_name, python_type in _JAVA_TO_PYTHON:
        if message.startswith(java_name + ":"):
            return python_type(message[len(java_name) + 1:].strip())
    head, _, text = message.partition(": ")
    if head.startswith(("java.", "org.")) and text:
        # FutureFailedException and friends wrap the original error: keep its class name visible.
        nested = translate(text)
        if not isinstance(nested, DTorchError):
            return nested
        return DTorchError(text)
    return DTorchError(message)


def call(fn, *args):
    """Calls a Java method, raising Python exceptions with the Java message."""
    try:
        return fn(*args)
    except polyglot.ForeignException as e:
        raise translate(str(e)) from None
