"""Line charts written as PNG files by the JVM (XChart, drawn off screen: no display and no Python package needed).

    from dtorch.plot import line_chart

    line_chart("loss.png", {"4 devices": losses, "one device": reference_losses}, title="Training loss",
               xlabel="step", ylabel="cross entropy", log_y=True)
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from . import _bridge

__all__ = ["line_chart"]


def line_chart(path: str | os.PathLike, series: Mapping[str, Any], title: str = "", xlabel: str = "", ylabel: str = "",
               log_y: bool = False) -> None:
    """Draws each series of `series` (name -> y values at x = 0, 1, ..., or name -> (xs, ys)) as a line of one chart,
    with a legend, and writes it to `path`, a .png file (800 x 500 pixels) that appears complete or not at all.
    log_y=True puts the y axis on a logarithmic scale. A series without points, of non-finite values, or of values
    that are not positive on a logarithmic axis raises ValueError naming the series before anything is written."""
    rows = []
    for name, values in series.items():
        if isinstance(values, tuple) and len(values) == 2:
            xs, ys = values
        else:
            ys = values
            xs = range(len(ys))
        rows.append([str(name), _floats(xs, name), _floats(ys, name)])
    if not rows:
        raise ValueError("line_chart needs at least one series")
    _bridge.call(_bridge.bridge().writeLineChart, os.fspath(path), str(title), str(xlabel), str(ylabel), rows, bool(log_y))


def _floats(values: Sequence[Any], name: str) -> list:
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError) as e:
        raise ValueError("series %r of line_chart must hold numbers: %s" % (name, e)) from None
