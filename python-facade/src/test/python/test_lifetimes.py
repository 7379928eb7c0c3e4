"""Closing tensors and values: with blocks, close(), and memoryviews that outlive their HostTensor's close()."""

import gc
import struct

import dtorch
from _testing import raises, run


def test_with_blocks_close_tensors_and_values():
    with dtorch.arange(8, dtype=dtorch.float32) as t:
        with (t * 2).to_torch() as value:
            assert value.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
        assert value.closed
        assert value.shape == (8,) and value.nbytes == 32  # metadata stays readable
    raises(RuntimeError, t.sum, contains="is closed")
    t.close()  # idempotent
    value.close()


def test_a_closed_value_refuses_every_read():
    value = dtorch.ones(1).to_torch()
    value.close()
    for read in (value.tolist, value.item, value.tobytes, value.memoryview):
        raises(RuntimeError, read, contains="is closed")
    assert "closed" in repr(value)


def test_a_view_keeps_its_bytes_after_close():
    value = dtorch.full((64, 64), 3.0).to_torch()
    view = value.memoryview()
    value.close()
    gc.collect()  # the future's own reference goes; only the view's pin holds the memory now
    for _ in range(20):
        dtorch.full((64, 64), -1.0).to_torch()  # same-size buffers, freed and reused
    gc.collect()
    rows = view.tolist()
    assert rows[0][0] == 3.0 and rows[63][63] == 3.0 and len(rows) == 64
    assert bytes(view.cast("B")[:4]) == struct.pack("f", 3.0)
    raises(RuntimeError, value.memoryview, contains="is closed")


run(globals())
