"""The handle a hook registration returns (torch.utils.hooks.RemovableHandle's behaviour): remove() takes the hook
out of every table it was put in; the handle is also a context manager that removes it on exit."""

from __future__ import annotations

import itertools
import weakref
from typing import Any

_IDS = itertools.count()


class RemovableHandle:
    """Removes one registered hook. id is the hook's key in its module's tables."""

    def __init__(self, hooks: dict, *extra: dict) -> None:
        self.id = next(_IDS)
        self._tables = [weakref.ref(hooks)] + [weakref.ref(t) for t in extra]

    def remove(self) -> None:
        """Takes the hook out; idempotent."""
        for ref in self._tables:
            table = ref()
            if table is not None:
                table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


class _HookTable(dict):
    """A dict of hooks that a weak reference can point to (a plain dict cannot)."""

    __slots__ = ("__weakref__",)


def hook_table() -> dict:
    return _HookTable()
