"""A tiny test runner for the polyglot integration tests: runs every test_* function of a module and exits 1,
with each failure's Python traceback on stderr, if any failed."""

import sys
import time
import traceback

# PythonScriptsTest passes --slow in its slow run (JUnit tag "slow"): long loops run at full length there only.
SLOW = "--slow" in sys.argv


def iterations(every_build, slow_run):
    """A loop's length: every_build in every build, slow_run in the slow run."""
    return slow_run if SLOW else every_build


def settled(read, what, seen=3, timeout=60):
    """read() once collections stop changing it: `seen` readings in a row, each after a gc.collect(), are equal.

    GraalPy has no reference counts: a dropped tensor is freed when a collection finds its handle, at a time of the JVM's
    choosing, so a reading of live memory taken right after a step may still count earlier garbage, or lose some of it
    in the middle of a measurement."""
    import gc
    readings = []
    deadline = time.monotonic() + timeout
    while len(readings) < seen or len(set(readings[-seen:])) > 1:
        if time.monotonic() > deadline:
            raise AssertionError("%s did not settle in %d s of collections: last readings %r" % (what, timeout, readings[-6:]))
        gc.collect()
        readings.append(read())
    return readings[-1]


def close_tensor(got, want, what, atol=1e-5):
    """Asserts that `got` (a torch tensor, or a distributed one, compared whole) has `want`'s shape and values to 1e-4
    relative and `atol` absolute, naming `what` and the largest difference otherwise."""
    import dtorch
    import torch
    value = got.full_tensor() if isinstance(got, dtorch.Tensor) else got
    assert tuple(value.shape) == tuple(want.shape), "%s: shape %s vs %s" % (what, tuple(value.shape), tuple(want.shape))
    assert torch.allclose(value, want, rtol=1e-4, atol=atol), "%s: differs by %s" % (what, (value - want).abs().max().item())


def run(namespace):
    tests = [(name, fn) for name, fn in namespace.items() if name.startswith("test_") and callable(fn)]
    failed = []
    for name, fn in tests:
        start = time.monotonic()
        try:
            fn()
            print("PASS %s (%.1f s)" % (name, time.monotonic() - start))
        except BaseException:  # noqa: B902 - report everything, keep going
            failed.append(name)
            print("FAIL", name, file=sys.stderr)
            traceback.print_exc()
    print("%d passed, %d failed" % (len(tests) - len(failed), len(failed)))
    if failed:
        sys.stderr.flush()
        raise SystemExit(1)


def raises(exception_type, fn, *args, contains=None, **kwargs):
    """Asserts fn(*args) raises exception_type (whose message contains `contains`); returns the exception."""
    try:
        fn(*args, **kwargs)
    except exception_type as e:
        if contains is not None and contains not in str(e):
            raise AssertionError("%s raised, but its message %r lacks %r" % (exception_type.__name__, str(e), contains))
        return e
    raise AssertionError("%s was not raised" % exception_type.__name__)


def close(a, b, tolerance=1e-5):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), "%r vs %r" % (a, b)
        for x, y in zip(a, b):
            close(x, y, tolerance)
        return
    assert abs(a - b) <= tolerance * max(1.0, abs(a), abs(b)), "%r vs %r" % (a, b)
