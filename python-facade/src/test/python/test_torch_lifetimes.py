"""torch tensors that a script drops are freed: GraalPy has no reference counts, so what bounds native memory is the
collection of their Java handles, which the native-memory budget requests for large tensors."""

import gc
import resource
import time

import polyglot
import torch
from _testing import iterations, run

JAVA = polyglot.import_value("dtorch.torch")
MIB = 1 << 20


def rss():
    """The process's peak resident size (GraalPy reads /proc files as empty, so the peak is what Python can see)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# Every build: 5,000 iterations, 625 MiB of 128 KiB tensors, past the native memory budget's 512 MiB, so that the
# budget requests a collection; the slow run: 20,000 (2.5 GiB), where a loop that kept its tensors would cross the
# bounds below.
LOOP = iterations(5000, 20000)


def test_dropped_128_kib_tensors_stay_within_the_budget():
    x = torch.ones(128, 256)  # 128 KiB: 2.5 GiB over 20,000 iterations if nothing were freed
    gc.collect()
    before = rss()
    charged_before = JAVA.chargedBytes()
    peak_charged = 0
    for i in range(LOOP):
        y = x * 2
        if i % 500 == 0:
            peak_charged = max(peak_charged, JAVA.chargedBytes() - charged_before)
    del y
    grown = rss() - before
    # Collections ran during the loop (how often depends on what the JVM held before: the budget spaces requests by what is still held) ...
    assert peak_charged < 2300 * MIB, "charged %d MiB" % (peak_charged // MIB)
    assert grown < 1500 * MIB, "the peak RSS grew by %d MiB over %d dropped 128 KiB tensors" % (grown // MIB, LOOP)
    # ... and once collected, every dropped handle gave its bytes back.
    deadline = time.monotonic() + 30
    while JAVA.chargedBytes() - charged_before > 4 * MIB and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    left = JAVA.chargedBytes() - charged_before
    assert left <= 4 * MIB, "%d MiB still charged after collections" % (left // MIB)


def test_small_temporaries_are_freed():
    # Counted in native handles, not in resident size: the peak RSS of this JVM also holds its heap's growth, which
    # 40,000 dropped Python objects and GraalPy's compilations bring whatever happens to the tensors.
    a = torch.ones(1)
    gc.collect()
    before = JAVA.liveNativeHandles()
    for _ in range(LOOP):
        a = a + 1
        _ = torch.zeros(2, 2).sum()
    assert a.item() == LOOP + 1.0
    del _
    deadline = time.monotonic() + 30
    while JAVA.liveNativeHandles() - before > 1000 and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    left = JAVA.liveNativeHandles() - before
    assert left <= 1000, "%d native handles of %d dropped small tensors still live after collections" % (left, 2 * LOOP)


def test_close_frees_at_once():
    charged = JAVA.chargedBytes()
    t = torch.zeros(1024, 1024)  # 4 MiB, charged
    assert JAVA.chargedBytes() >= charged + 4 * MIB - 4096
    t.close()
    assert JAVA.chargedBytes() <= charged + 4096 or JAVA.chargedBytes() < charged + 4 * MIB


run(globals())
