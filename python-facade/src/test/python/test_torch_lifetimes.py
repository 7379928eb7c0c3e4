"""torch tensors that a script drops are freed: GraalPy has no reference counts, so what bounds native memory is the
collection of their Java handles, which the native-memory budget requests for large tensors."""

import gc
import resource

import polyglot
import torch
from _testing import run

JAVA = polyglot.import_value("dtorch.torch")
MIB = 1 << 20


def rss():
    """The process's peak resident size (GraalPy reads /proc files as empty, so the peak is what Python can see)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_twenty_thousand_dropped_128_kib_tensors_stay_within_the_budget():
    x = torch.ones(128, 256)  # 128 KiB: 2.5 GiB over the loop if nothing were freed
    gc.collect()
    before = rss()
    peak_charged = 0
    for i in range(20000):
        y = x * 2
        if i % 500 == 0:
            peak_charged = max(peak_charged, JAVA.chargedBytes())
    del y
    grown = rss() - before
    assert peak_charged < 1100 * MIB, "charged %d MiB" % (peak_charged // MIB)
    assert grown < 1200 * MIB, "the peak RSS grew by %d MiB over 20,000 dropped 128 KiB tensors" % (grown // MIB)


def test_twenty_thousand_small_temporaries_are_freed():
    a = torch.ones(1)
    gc.collect()
    before = rss()
    for _ in range(20000):
        a = a + 1
        _ = torch.zeros(2, 2).sum()
    assert a.item() == 20001.0
    grown = rss() - before
    assert grown < 300 * MIB, "the peak RSS grew by %d MiB over 40,000 small dropped tensors" % (grown // MIB)


def test_close_frees_at_once():
    charged = JAVA.chargedBytes()
    t = torch.zeros(1024, 1024)  # 4 MiB, charged
    assert JAVA.chargedBytes() >= charged + 4 * MIB - 4096
    t.close()
    assert JAVA.chargedBytes() <= charged + 4096 or JAVA.chargedBytes() < charged + 4 * MIB


run(globals())
