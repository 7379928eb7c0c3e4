"""dtorch.plot.line_chart writes a PNG of its series from the JVM (XChart, off screen), with x values given or counted
from 0; bad series raise ValueError naming the series before anything is written."""

import os
import struct
import tempfile

from dtorch.plot import line_chart
from _testing import raises, run


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head[:8]
    return struct.unpack(">II", head[16:24])


def test_a_chart_of_two_series_is_a_png_of_800_by_500():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "loss.png")
        line_chart(path, {"4 devices": [4.0, 3.0, 2.5, 2.0], "one device": ([0, 1, 2, 3], [4.0, 3.1, 2.4, 2.1])},
                   title="loss", xlabel="step", ylabel="cross entropy", log_y=True)
        assert png_size(path) == (800, 500)
        assert os.listdir(d) == ["loss.png"], os.listdir(d)


def test_bad_series_name_the_series_and_write_nothing():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "loss.png")
        raises(ValueError, line_chart, path, {"a": ([0, 1, 2], [1.0, 2.0])}, contains="series 'a' has 3 x values but 2 y values")
        raises(ValueError, line_chart, path, {"b": [1.0, 0.0]}, log_y=True, contains="series 'b' point 1")
        raises(ValueError, line_chart, path, {"c": ["x"]}, contains="series 'c' of line_chart must hold numbers")
        raises(ValueError, line_chart, path, {}, contains="at least one series")
        raises(ValueError, line_chart, os.path.join(d, "loss.svg"), {"d": [1.0]}, contains="must end in .png")
        assert os.listdir(d) == [], os.listdir(d)


run(globals())
