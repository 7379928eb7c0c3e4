#!/usr/bin/env python3
"""Renders a Chrome trace event JSON file (DTorch's trace, docs/observability.md) as an SVG timeline.

One lane per process and thread, in the trace's process order; complete events ("ph": "X") as rectangles stacked by
nesting depth and labelled by name where they are wide enough; instants as ticks; colours by category (collectives
stand out); optional flow arrows from each operator's enqueue to its kernels; a time axis in milliseconds. Hovering a
rectangle in a browser shows its name, duration and arguments.

    python3 tools/trace_to_svg.py trace.json trace.svg [--from-ms A] [--to-ms B] [--width PX] [--flows] [--title T]

Python 3 standard library only.
"""

import argparse
import json
import math
from xml.sax.saxutils import escape

COLOURS = {"client": "#6a9fd8", "controller": "#9bb3cf", "kernel": "#79b26b", "collective": "#e4743b", "store": "#a67cc7",
           "promise": "#444444"}
OTHER_COLOUR = "#bbbbbb"
LABEL_WIDTH = 210
ROW_HEIGHT = 18
LANE_GAP = 8
TOP = 58
CHAR_WIDTH = 6.2


def load(path):
    """The trace's events, its process names, and its thread names by (pid, tid)."""
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return (events,) + load_names(events)


def load_names(events):
    """The process names by pid and the thread names by (pid, tid) of the metadata events."""
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    return processes, threads


def depths(spans):
    """Each span's nesting depth within its lane, by id(span): how many spans of its lane enclose it."""
    out, open_ends = {}, {}
    for s in sorted(spans, key=lambda s: (s["ts"], -s["dur"])):
        stack = open_ends.setdefault((s["pid"], s["tid"]), [])
        while stack and stack[-1] <= s["ts"]:
            stack.pop()
        out[id(s)] = len(stack)
        stack.append(s["ts"] + s["dur"])
    return out


def tick_step(span_ms, pixels):
    """A 1, 2 or 5 times a power of ten of milliseconds, about every 110 pixels."""
    raw = span_ms * 110.0 / max(pixels, 1)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def render(events, processes, threads, width, start_ms=None, end_ms=None, flows=False, title=None):
    """The SVG document, as a string."""
    spans = [e for e in events if e.get("ph") == "X"]
    instants = [e for e in events if e.get("ph") == "i"]
    if not spans:
        raise ValueError("the trace has no complete events to draw")
    t0 = start_ms * 1000.0 if start_ms is not None else min(e["ts"] for e in spans)
    t1 = end_ms * 1000.0 if end_ms is not None else max(e["ts"] + e["dur"] for e in spans)
    if t1 <= t0:
        raise ValueError("empty window: from %.3f ms to %.3f ms" % (t0 / 1000.0, t1 / 1000.0))
    spans = [e for e in spans if e["ts"] < t1 and e["ts"] + e["dur"] > t0]
    instants = [e for e in instants if t0 <= e["ts"] <= t1]
    plot = width - LABEL_WIDTH - 10

    def x(ts):
        return LABEL_WIDTH + (min(max(ts, t0), t1) - t0) * plot / (t1 - t0)

    lanes = sorted({(e["pid"], e["tid"]) for e in spans + instants})
    depth = depths(spans)
    lane_top, y = {}, TOP
    for lane in lanes:
        lane_top[lane] = y
        deepest = max([depth[id(s)] for s in spans if (s["pid"], s["tid"]) == lane] + [0])
        y += (deepest + 1) * ROW_HEIGHT + LANE_GAP
    height = y + 24

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="10">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="18" font-size="13" font-weight="bold">%s</text>' % escape(title or "DTorch trace")]
    step = tick_step((t1 - t0) / 1000.0, plot)
    tick = math.ceil(t0 / 1000.0 / step) * step
    while tick <= t1 / 1000.0 + 1e-9:
        tx = x(tick * 1000.0)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e3e3e3"/>' % (tx, TOP - 6, tx, height - 24))
        out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%g ms</text>' % (tx, TOP - 10, round(tick, 9)))
        tick += step
    for lane in lanes:
        pid, tid = lane
        label = "%s / %s" % (processes.get(pid, "pid %s" % pid), threads.get(lane, "tid %s" % tid))
        out.append('<text x="6" y="%d">%s</text>' % (lane_top[lane] + 13, escape(label)))
    for s in spans:
        top = lane_top[(s["pid"], s["tid"])] + depth[id(s)] * ROW_HEIGHT
        left, right = x(s["ts"]), x(s["ts"] + s["dur"])
        w = max(right - left, 0.8)
        colour = COLOURS.get(s.get("cat"), OTHER_COLOUR)
        tip = "%s (%s) %.3f ms %s" % (s["name"], s.get("cat", ""), s["dur"] / 1000.0, json.dumps(s.get("args", {})))
        out.append('<g><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="white" stroke-width="0.5"/>'
                   % (escape(tip), left, top, w, ROW_HEIGHT - 2, colour))
        chars = int((w - 4) / CHAR_WIDTH)
        if chars >= 3:
            name = s["name"] if len(s["name"]) <= chars else s["name"][:chars - 1] + "\u2026"
            out.append('<text x="%.2f" y="%d" fill="black">%s</text>' % (left + 2, top + 12, escape(name)))
        out.append('</g>')
    for e in instants:
        ix, top = x(e["ts"]), lane_top[(e["pid"], e["tid"])]
        out.append('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="%s"><title>%s</title></line>'
                   % (ix, top, ix, top + ROW_HEIGHT - 2, COLOURS["promise"], escape(e["name"])))
    if flows:
        out.extend(flow_lines(events, x, lane_top, t0, t1))
    out.append(legend(height - 8))
    out.append('</svg>')
    return "\n".join(out) + "\n"


def flow_lines(events, x, lane_top, t0, t1):
    """A thin arrow per flow id whose start and finish are both in the window and on drawn lanes."""
    starts = {e["id"]: e for e in events if e.get("ph") == "s"}
    lines = []
    for f in (e for e in events if e.get("ph") == "f"):
        s = starts.get(f["id"])
        ends = (s, f)
        if s is None or any((e["pid"], e["tid"]) not in lane_top or not t0 <= e["ts"] <= t1 for e in ends):
            continue
        lines.append('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#333" stroke-opacity="0.35" stroke-width="0.7"/>'
                     % (x(s["ts"]), lane_top[(s["pid"], s["tid"])] + 8, x(f["ts"]), lane_top[(f["pid"], f["tid"])] + 1))
    return lines


def legend(y):
    """A row of the colours and their categories."""
    items, left = [], LABEL_WIDTH
    for category, colour in COLOURS.items():
        items.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>'
                     % (left, y - 9, colour, left + 14, y, category))
        left += 24 + int(CHAR_WIDTH * len(category)) + 12
    return "\n".join(items)


def main():
    parser = argparse.ArgumentParser(description="Render a Chrome trace event JSON file as an SVG timeline.")
    parser.add_argument("trace", help="the trace (JSON)")
    parser.add_argument("svg", help="the SVG file to write")
    parser.add_argument("--from-ms", type=float, help="start of the window, in the trace's milliseconds (default: first event)")
    parser.add_argument("--to-ms", type=float, help="end of the window (default: the last event's end)")
    parser.add_argument("--width", type=int, default=1400, help="width in pixels (default 1400)")
    parser.add_argument("--flows", action="store_true", help="draw an arrow from each operator's enqueue to each of its kernels")
    parser.add_argument("--title", help="a title above the timeline")
    args = parser.parse_args()
    events, processes, threads = load(args.trace)
    svg = render(events, processes, threads, args.width, args.from_ms, args.to_ms, args.flows, args.title)
    with open(args.svg, "w", encoding="utf-8") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
