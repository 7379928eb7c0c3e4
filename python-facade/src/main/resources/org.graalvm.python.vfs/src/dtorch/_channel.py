"""Declared pipeline edges: dtorch.channel(src_mesh, dst_mesh) sends redistributions between two disjoint meshes
through a WorkerTensorChannel (TeleFuser's direct worker-to-worker path) instead of the ordinary cross-mesh path."""

from __future__ import annotations

from typing import Any

from . import _bridge
from .distributed_spec import DeviceMesh


class Channel:
    """A declared edge from one mesh to another. While it is open, every redistribute() from exactly src_mesh onto
    exactly dst_mesh goes through its channel: the source mesh publishes the value once and runs on, at most two
    transfers of one shape ahead of the destination. close() (or leaving a `with` block) drains: the destination devices
    detach, then the source, then the channel's shared memory goes; the runtime's shutdown closes an edge left open."""

    def __init__(self, java: Any, src_mesh: DeviceMesh, dst_mesh: DeviceMesh) -> None:
        self._java = java
        self.src_mesh = src_mesh
        self.dst_mesh = dst_mesh
        self._closed = False

    @property
    def name(self) -> str:
        """The channel's name in the runtime."""
        return str(_bridge.bridge().channelName(self._java))

    @property
    def transfers(self) -> int:
        """How many redistributions went through the channel so far."""
        return int(_bridge.bridge().channelTransfers(self._java))

    def close(self) -> None:
        """Detaches both sides and removes the channel; later moves between the meshes take the ordinary path.
        Idempotent."""
        if not self._closed:
            self._closed = True
            _bridge.call(_bridge.bridge().closeChannel, self._java)

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self):
        return "Channel(%r -> %r%s)" % (self.src_mesh, self.dst_mesh, ", closed" if self._closed else "")


def channel(src_mesh: DeviceMesh, dst_mesh: DeviceMesh, timeout: float | None = None) -> Channel:
    """Declares the pipeline edge src_mesh -> dst_mesh (disjoint meshes of the runtime) and returns its Channel, usable
    with `with`. `timeout` (seconds, default the runtime's) bounds every wait of the channel. Declaring an open edge
    again raises RuntimeError; meshes that share a device raise ValueError."""
    if not isinstance(src_mesh, DeviceMesh) or not isinstance(dst_mesh, DeviceMesh):
        raise TypeError("channel() takes two DeviceMesh objects, got %r and %r" % (src_mesh, dst_mesh))
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
        raise ValueError("channel(): timeout must be a positive number of seconds or None, got %r" % (timeout,))
    java = _bridge.call(_bridge.bridge().channel, src_mesh._java, dst_mesh._java, float(timeout or 0))
    return Channel(java, src_mesh, dst_mesh)
