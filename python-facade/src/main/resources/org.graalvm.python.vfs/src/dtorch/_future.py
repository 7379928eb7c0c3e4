"""TensorFuture: a value the workers will produce."""

from __future__ import annotations

from typing import Any, Callable, Generator

from . import _bridge
import torch
from torch._tensor import make_tensor


class TensorFuture:
    """The future of a whole tensor (DTorch's _GetTensorAsync).

    get() and wait() block in Java, which releases the GIL: other Python threads keep running. `await` does
    not poll: the runtime's completion callback wakes the event loop with call_soon_threadsafe.
    """

    __slots__ = ("_java", "_source")

    def __init__(self, java, source=None):
        self._java = java
        self._source = source  # keeps the tensor's handle alive while the value is pending

    def get(self) -> torch.Tensor:
        """The value; blocks until it arrives (up to the runtime's timeout)."""
        return make_tensor(_bridge.call(self._java.get))

    def wait(self, timeout_ms: int) -> torch.Tensor:
        """The value; raises TimeoutError if it has not arrived within `timeout_ms` milliseconds."""
        return make_tensor(_bridge.call(self._java.waitMillis, int(timeout_ms)))

    def is_ready(self) -> bool:
        """True once the value (or an error) is present."""
        return self._java.isReady()

    result = get

    def add_done_callback(self, fn: Callable[[torch.Tensor | None, Exception | None], Any]) -> None:
        """Calls fn(value, error) once done: a torch.Tensor and None, or None and an exception.

        fn runs on one of the runtime's callback threads (never on a device's worker), so it may block, even on
        another future; an exception it raises is printed and otherwise ignored.
        """
        def done(value, error):
            fn(make_tensor(value) if value is not None else None, _bridge.translate(error) if error is not None else None)
        self._java.onDone(done)

    def __await__(self) -> Generator[Any, None, torch.Tensor]:
        """Waits without polling, up to the runtime's timeout (then raises TimeoutError, like get())."""
        import asyncio  # here, not at import: asyncio and what it brings (sockets, ssl, logging) slow down every import of dtorch
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        timeout_ms = self._java.timeoutMillis()

        def expire():
            if not waiter.done():
                waiter.set_exception(TimeoutError(
                    "await of TensorFuture timed out after %s: the value has not arrived" % _seconds(timeout_ms)))

        timer = loop.call_later(timeout_ms / 1000.0, expire)

        def resolve(value, error):
            timer.cancel()
            if waiter.done():  # the awaiting task was cancelled, or the deadline passed: nobody wants the value
                return
            if error is not None:
                waiter.set_exception(_bridge.translate(error))
            else:
                waiter.set_result(make_tensor(value))

        def done(value, error):
            try:
                loop.call_soon_threadsafe(resolve, value, error)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting any more

        self._java.onDone(done)
        try:
            return (yield from waiter.__await__())
        finally:
            timer.cancel()

    def __repr__(self):
        return "TensorFuture(ready=%s)" % self.is_ready()


def _seconds(millis):
    return "%g s" % (millis / 1000.0)
