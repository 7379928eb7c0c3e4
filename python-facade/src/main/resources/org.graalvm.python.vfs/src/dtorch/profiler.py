"""A timeline of what the runtime did, in the manner of torch.profiler (docs/observability.md, "From Python").

    with dtorch.profiler.profile() as prof:
        y = (x @ w).redistribute(mesh, [Replicate()])
    prof.export_chrome_trace("trace.json")        # open it in https://ui.perfetto.dev or chrome://tracing
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

The profiler records the whole JVM: the client's operators, and each device's kernels, collectives and store waits.
One records at a time (`./dtorch run --trace FILE` records the whole run, so a profile() inside it is refused). With
--per-device-process a profile() has the client's row only: the devices' events reach traces that span the runtime.
"""

from __future__ import annotations

import os
from typing import Any

from . import _bridge

__all__ = ["profile", "EventList", "FunctionEventAvg"]


class FunctionEventAvg:
    """The totals of one operator or collective over a trace (a row of key_averages()).

    key: the operator's name, or the collective's (`allReduce(sum)`, `barrier`, ...) or store call's;
    category: "kernel" (on the devices), "device" (a CUDA kernel's device time), "collective", "store", "client"
        (enqueued) or "controller" (dispatched);
    count: how many times it ran, summed over devices;
    cpu_time_total: the time it took, summed over calls, in microseconds (host time);
    cpu_time: cpu_time_total / count;
    bytes: the bytes the ranks contributed, summed (collectives; 0 for the others).
    """

    __slots__ = ("key", "category", "count", "cpu_time_total", "bytes")

    def __init__(self, category, key, count, total_nanos, nbytes):
        self.category = category
        self.key = key
        self.count = count
        self.cpu_time_total = total_nanos / 1000.0
        self.bytes = nbytes

    @property
    def cpu_time(self) -> float:
        """Mean time per call, in microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return "<FunctionEventAvg key=%s category=%s count=%d cpu_time_total=%.1f us bytes=%d>" % (
            self.key, self.category, self.count, self.cpu_time_total, self.bytes)


class EventList(list):
    """key_averages(): a list of FunctionEventAvg rows, the most time first."""

    SORT_KEYS = ("cpu_time_total", "cpu_time", "count", "bytes")

    def table(self, sort_by: str | None = None, row_limit: int = 100) -> str:
        """The rows as a text table: Name, Category, Calls, CPU total (us), CPU avg (us), Bytes.

        sort_by: None (the list's order, most time first) or one of "cpu_time_total", "cpu_time", "count", "bytes",
        each largest first (ties keep the list's order); row_limit: at most this many rows, all of them if negative.
        """
        if sort_by is not None and sort_by not in self.SORT_KEYS:
            raise ValueError("sort_by must be None or one of %s, got %r" % (", ".join(self.SORT_KEYS), sort_by))
        rows = list(self) if sort_by is None else sorted(self, key=lambda r: getattr(r, sort_by), reverse=True)
        if row_limit >= 0:
            rows = rows[:row_limit]
        width = max([4] + [len(r.key) for r in rows])
        line = "%-*s  %-10s  %8s  %14s  %12s  %14s"
        out = [line % (width, "Name", "Category", "Calls", "CPU total (us)", "CPU avg (us)", "Bytes"), "-" * (width + 70)]
        for r in rows:
            out.append(line % (width, r.key, r.category, r.count, "%.1f" % r.cpu_time_total, "%.2f" % r.cpu_time, r.bytes))
        return "\n".join(out) + "\n"


class profile:
    """Records the runtime between start() and stop(), or over a `with` block.

    Leaving the block (or stop()) waits for the devices to finish what the script issued (dtorch.sync()), so their
    kernels are in the trace, then stops. Raises RuntimeError when another profiler already records.
    """

    def __init__(self) -> None:
        self._recording = False
        self._trace = None

    def start(self) -> None:
        """Starts recording."""
        _bridge.call(_bridge.bridge().profilerStart)
        self._recording = True

    def stop(self) -> None:
        """Waits for the devices (dtorch.sync()), then stops recording."""
        if not self._recording:
            raise RuntimeError("profile.stop: this profiler is not recording (call start() first)")
        self._recording = False
        try:
            _bridge.call(_bridge.bridge().sync)
        finally:
            self._trace = _bridge.call(_bridge.bridge().profilerStop)

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            self.stop()
        except Exception:
            if exc_type is None:
                raise
            # The block's own error says more than a sync that failed after it; the recording is stopped either way.
        return False

    def _require_trace(self, what):
        if self._trace is None:
            raise RuntimeError("profile.%s: no trace yet (leave the with block, or call stop(), first)" % what)
        return self._trace

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes the trace to `path` as Chrome trace event JSON (Perfetto, chrome://tracing)."""
        text = _bridge.call(_bridge.bridge().chromeJson, self._require_trace("export_chrome_trace"))
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def chrome_trace(self) -> dict[str, Any]:
        """The trace as Chrome trace event JSON, parsed: a dict with "traceEvents"."""
        import json  # here, not at import: only a trace read back needs it
        return json.loads(_bridge.call(_bridge.bridge().chromeJson, self._require_trace("chrome_trace")))

    def key_averages(self) -> EventList:
        """The totals per operator and collective (FunctionEventAvg rows), the most time first, as an EventList."""
        rows = _bridge.call(_bridge.bridge().keyAverages, self._require_trace("key_averages"))
        return EventList(FunctionEventAvg(str(row[0]), str(row[1]), int(row[2]), int(row[3]), int(row[4])) for row in rows)
