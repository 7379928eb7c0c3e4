"""Isolated mode (`dtorch run --isolated`): no native code and no sockets, so no ctypes and no asyncio self-pipe.

In isolated mode, asyncio runs on the event loop of _isolated_loop, which needs no self-pipe; that module (and asyncio
with it) is imported only then, since asyncio and what it imports cost every other script's `import dtorch` time.
"""

import polyglot

ACTIVE = bool(polyglot.import_value("dtorch.isolated"))


def refuse(what):
    """The error for something isolated mode does not allow."""
    return RuntimeError(what + " needs native access (ctypes), which `dtorch run --isolated` turns off; "
                               "use tolist() or item()")


def install():
    """Makes asyncio.run() and new_event_loop() use the isolated event loop, in isolated mode only."""
    if ACTIVE:
        from . import _isolated_loop
        _isolated_loop.install()
