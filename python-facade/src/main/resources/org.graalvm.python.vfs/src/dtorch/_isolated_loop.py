"""asyncio's event loop for isolated mode (`dtorch run --isolated`, see _isolation).

asyncio's selector loop wakes itself from other threads through a socket pair, which an isolated context refuses.
The loop here waits on a threading.Condition instead: call_soon_threadsafe (the runtime's completion callback) notifies
it, so `await` still wakes without polling. It watches no file descriptors (an isolated script has none to watch).
"""

import asyncio
import selectors
import threading


class _ConditionSelector(selectors.BaseSelector):
    """A selector with nothing to select: select() sleeps until the timeout or wake()."""

    def __init__(self):
        self._condition = threading.Condition()
        self._woken = False

    def register(self, fileobj, events, data=None):
        raise OSError("an isolated script has no file descriptors to watch")

    def unregister(self, fileobj):
        raise KeyError(fileobj)

    def select(self, timeout=None):
        with self._condition:
            if not self._woken:
                self._condition.wait(None if timeout is None else max(timeout, 0))
            self._woken = False
        return []

    def wake(self):
        with self._condition:
            self._woken = True
            self._condition.notify()

    def close(self):
        pass

    def get_map(self):
        return {}


class IsolatedEventLoop(asyncio.SelectorEventLoop):
    """asyncio's loop, woken through a condition instead of a self-pipe socket."""

    def __init__(self):
        super().__init__(_ConditionSelector())

    def _make_self_pipe(self):
        pass

    def _close_self_pipe(self):
        pass

    def _write_to_self(self):
        self._selector.wake()


class _IsolatedPolicy(asyncio.DefaultEventLoopPolicy):
    _loop_factory = IsolatedEventLoop


def install():
    """Makes asyncio.run() and new_event_loop() use IsolatedEventLoop."""
    if not isinstance(asyncio.get_event_loop_policy(), _IsolatedPolicy):
        asyncio.set_event_loop_policy(_IsolatedPolicy())
