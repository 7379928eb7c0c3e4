"""dtorch.profiler: a torch.profiler-style window of the runtime, its Chrome trace and its key_averages() table."""

import json
import os
import sys
import tempfile
from xml.etree import ElementTree

import dtorch
from dtorch import Replicate, Shard
from _testing import raises, run

PARTIAL_BYTES = 4 * 6 * 4  # the [4, 6] float32 partial sum each device contributes to the all-reduce


_PROFILED = []


def _profile_matmul_and_all_reduce():
    """A [4, 8] S(1) times an [8, 6] S(0) on 4 devices (a partial sum), made replicated: one all-reduce (profiled once)."""
    if not _PROFILED:
        _PROFILED.append(_profile())
    return _PROFILED[0]


def _profile():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = dtorch.ones(4, 8, device_mesh=mesh, placements=[Shard(1)])
    w = dtorch.full((8, 6), 2.0, device_mesh=mesh, placements=[Shard(0)])
    with dtorch.profiler.profile() as prof:
        y = x.matmul(w).redistribute(mesh, [Replicate()])
    assert y.to_torch().tolist() == [[16.0] * 6] * 4
    return prof


def _events(trace, category):
    return [e for e in trace["traceEvents"] if e.get("cat") == category]


def test_the_trace_has_a_kernel_on_every_device_for_each_operator():
    prof = _profile_matmul_and_all_reduce()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    assert trace == prof.chrome_trace()
    # The window ends with the sync that waits for the devices: one sync operator per device, whose kernels may end
    # after the recording stopped.
    enqueued = {e["args"]["op"]: e for e in _events(trace, "client") if e["name"] != "sync"}
    assert sorted(e["name"] for e in enqueued.values()) == ["matmul", "redistribute"], enqueued
    syncs = [e["args"]["devices"] for e in _events(trace, "client") if e["name"] == "sync"]
    assert syncs == [[0], [1], [2], [3]], syncs
    kernels = {(e["args"]["op"], e["args"]["device"]): e for e in _events(trace, "kernel")}
    for op, e in enqueued.items():
        assert e["args"]["devices"] == [0, 1, 2, 3], e
        for device in range(4):
            kernel = kernels[(op, device)]
            assert kernel["name"] == e["name"] and kernel["pid"] == device + 1, kernel
            assert kernel["ts"] >= e["ts"], (e, kernel)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert [names[pid] for pid in range(1, 5)] == ["device cpu:%d" % d for d in range(4)], names


def test_collective_events_carry_the_bytes_of_the_shapes():
    trace = _profile_matmul_and_all_reduce().chrome_trace()
    reductions = [e for e in _events(trace, "collective") if e["args"]["kind"] == "ALL_REDUCE"]
    assert sorted(e["pid"] for e in reductions) == [1, 2, 3, 4], reductions
    assert [e["args"]["bytes"] for e in reductions] == [PARTIAL_BYTES] * 4, reductions


def test_key_averages_rows_and_table():
    rows = _profile_matmul_and_all_reduce().key_averages()
    by_key = {(r.category, r.key): r for r in rows}
    assert by_key[("client", "matmul")].count == 1 and by_key[("client", "redistribute")].count == 1
    assert by_key[("kernel", "matmul")].count == 4 and by_key[("kernel", "redistribute")].count == 4
    reduction = by_key[("collective", "allReduce(sum)")]
    assert (reduction.count, reduction.bytes) == (4, 4 * PARTIAL_BYTES), reduction
    assert by_key[("kernel", "matmul")].bytes == 0
    totals = [r.cpu_time_total for r in rows]
    assert totals == sorted(totals, reverse=True) and all(t > 0 for t in totals), rows
    assert abs(reduction.cpu_time * reduction.count - reduction.cpu_time_total) < 1e-6

    table = rows.table(sort_by="bytes", row_limit=2).splitlines()
    assert len(table) == 4, table  # header, rule, two rows
    assert table[0].split() == ["Name", "Category", "Calls", "CPU", "total", "(us)", "CPU", "avg", "(us)", "Bytes"], table
    # The all-reduce, and the redistribution kernel that ran it (a kernel's row counts its collectives' bytes).
    assert sorted(tuple(line.split()[:3]) for line in table[2:]) == [("allReduce(sum)", "collective", "4"), ("redistribute", "kernel", "4")], table
    assert all(line.split()[-1] == str(4 * PARTIAL_BYTES) for line in table[2:]), table
    assert by_key[("kernel", "redistribute")].bytes == 4 * PARTIAL_BYTES
    assert len(rows.table().splitlines()) == 2 + len(rows)
    counts = [int(line.split()[2]) for line in rows.table(sort_by="count", row_limit=-1).splitlines()[2:]]
    assert counts == sorted(counts, reverse=True) and len(counts) == len(rows), counts
    raises(ValueError, rows.table, sort_by="self_cuda_time_total", contains="cpu_time_total")


def test_tools_trace_to_svg_draws_every_span_in_its_lane():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "tools"))
    import trace_to_svg
    trace = _profile_matmul_and_all_reduce().chrome_trace()
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    svg = ElementTree.fromstring(trace_to_svg.render(trace["traceEvents"], *trace_to_svg.load_names(trace["traceEvents"]),
                                                     width=1200, flows=True))
    ns = "{http://www.w3.org/2000/svg}"
    titled = [g for g in svg.iter(ns + "g")]
    assert len(titled) == len(spans), (len(titled), len(spans))
    colours = sorted(g.find(ns + "rect").get("fill") for g in titled if g.find(ns + "title").text.startswith("allReduce(sum) "))
    assert colours == [trace_to_svg.COLOURS["collective"]] * 4, colours
    labels = [t.text for t in svg.iter(ns + "text") if t.text and " / " in t.text]
    assert labels[0].startswith("host (client, controller) / ") and len(labels) == 5, labels
    assert [label.split(" / ")[0] for label in labels[1:]] == ["device cpu:%d" % d for d in range(4)], labels
    arrows = [line for line in svg.iter(ns + "line") if line.get("stroke") == "#333"]
    # One per flow: matmul's and redistribute's to their kernels on 4 devices, and those of the syncs whose kernels made it.
    flows = [e for e in trace["traceEvents"] if e["ph"] == "s"]
    assert len(arrows) == len(flows) and 8 <= len(flows) <= 12, (len(arrows), len(flows))


def test_one_profiler_at_a_time_and_no_trace_before_stop():
    prof = dtorch.profiler.profile()
    raises(RuntimeError, prof.key_averages, contains="no trace yet")
    raises(RuntimeError, prof.stop, contains="not recording")
    prof.start()
    try:
        raises(RuntimeError, dtorch.profiler.profile().start, contains="already being recorded")
    finally:
        prof.stop()
    assert [(r.category, r.key, r.count) for r in prof.key_averages() if r.category == "client"] == [("client", "sync", 4)]

    def fails_inside():
        with dtorch.profiler.profile():
            raise KeyError("inside")
    raises(KeyError, fails_inside, contains="inside")
    again = dtorch.profiler.profile()
    again.start()  # the failed block's recording was stopped
    again.stop()


run(globals())
