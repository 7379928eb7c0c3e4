package org.dtorch.core.trace;

import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Writes a {@link Trace} as Chrome trace event JSON (the "JSON Object Format" that Perfetto and
 * {@code chrome://tracing} load): {@code {"displayTimeUnit": "ms", "traceEvents": [...]}}.
 *
 * <ul>
 *   <li>a process row per {@link Tracer.Row} (the host, each device) with {@code process_name} and
 *       {@code process_sort_index} metadata, and a track per thread with {@code thread_name};</li>
 *   <li>spans as complete events ({@code "ph": "X"}, {@code ts} and {@code dur} in microseconds from the session's
 *       origin, with nanosecond decimals, so a span recorded inside another stays inside it); promise completions and
 *       control frames as thread-scoped instants ({@code "ph": "i"});</li>
 *   <li>a flow arrow from each operator's enqueue to its kernel on each device: a start ({@code "ph": "s"}) at the
 *       enqueue and a finish ({@code "ph": "f", "bp": "e"}) at the kernel's start, one id per (operator, device) pair,
 *       since a flow id in this format links one start to one finish.</li>
 * </ul>
 *
 * <p>Not thread-safe: one use.
 */
final class ChromeTraceWriter {
    private record Placed(Trace.Track track, TraceEvent event) {
    }

    private final Trace trace;
    private final JsonWriter json;

    ChromeTraceWriter(Trace trace, JsonWriter json) {
        this.trace = trace;
        this.json = json;
    }

    void write() throws IOException {
        json.beginObject().name("displayTimeUnit").value("ms").name("traceEvents").beginArray();
        writeMetadata();
        Map<Long, Placed> enqueues = new HashMap<>();
        for (Trace.Track track : trace.tracks()) {
            for (TraceEvent e : track.events()) {
                writeEvent(track, e);
                if (e.kind() == TraceEvent.Kind.ENQUEUE) {
                    enqueues.put(e.id(), new Placed(track, e));
                }
            }
        }
        writeFlows(enqueues);
        json.endArray().endObject();
    }

    private void writeMetadata() throws IOException {
        Map<Integer, String> processes = new TreeMap<>();
        for (Trace.Track track : trace.tracks()) {
            processes.putIfAbsent(track.row().pid(), track.row().name());
        }
        for (Map.Entry<Integer, String> p : processes.entrySet()) {
            metadata("process_name", p.getKey(), 0).name("name").value(p.getValue()).endObject().endObject();
            metadata("process_sort_index", p.getKey(), 0).name("sort_index").value(p.getKey()).endObject().endObject();
        }
        for (Trace.Track track : trace.tracks()) {
            metadata("thread_name", track.row().pid(), track.tid()).name("name").value(track.threadName())
                .endObject().endObject();
        }
    }

    /** Opens a metadata event and its {@code args} object; the caller writes the arguments and closes both. */
    private JsonWriter metadata(String name, int pid, long tid) throws IOException {
        return json.beginObject().name("ph").value("M").name("name").value(name).name("pid").value(pid).name("tid").value(tid)
            .name("args").beginObject();
    }

    private void writeEvent(Trace.Track track, TraceEvent e) throws IOException {
        json.beginObject().name("name").value(e.name()).name("cat").value(e.kind().category);
        if (e.kind().instant) {
            json.name("ph").value("i").name("s").value("t");
        } else {
            json.name("ph").value("X").name("dur").micros(e.end() - e.start());
        }
        json.name("ts").micros(e.start() - trace.origin()).name("pid").value(track.row().pid()).name("tid").value(track.tid());
        json.name("args").beginObject();
        writeArgs(e);
        json.endObject().endObject();
    }

    private void writeArgs(TraceEvent e) throws IOException {
        switch (e.kind()) {
            case ENQUEUE -> {
                json.name("op").value(e.id()).name("devices").beginArray();
                for (Object device : (List<?>) e.b()) {
                    json.value(((Number) device).longValue());
                }
                json.endArray();
                if (e.a() instanceof List<?> metas && !metas.isEmpty() && metas.getFirst() instanceof TensorMeta meta) {
                    json.name("shape").beginArray();
                    for (long s : meta.shape()) {
                        json.value(s);
                    }
                    json.endArray().name("dtype").value(TorchTensors.dtypeName(meta.dtype()))
                        .name("placements").value(meta.placements().toString())
                        .name("mesh").value(meta.sharding().mesh().toString());
                }
            }
            case DISPATCH -> json.name("op").value(e.id());
            case KERNEL, DEVICE_KERNEL -> json.name("op").value(e.id()).name("device").value(e.count());
            case COLLECTIVE -> json.name("kind").value(e.a() == null ? "completion" : e.a().toString())
                .name("backend").value(String.valueOf(e.c()))
                .name("bytes").value(e.count()).name("group").value(String.valueOf(e.b()));
            case DEVICE_COLLECTIVE -> json.name("device").value(e.count());
            case STORE_WAIT -> json.name("key").value(String.valueOf(e.a()));
            case CONTROL -> json.name("peer").value(String.valueOf(e.a())).name("seq").value(e.id()).name("bytes").value(e.count());
            case PROMISE -> {
            }
        }
    }

    private void writeFlows(Map<Long, Placed> enqueues) throws IOException {
        long flowId = 0;
        for (Trace.Track track : trace.tracks()) {
            for (TraceEvent kernel : track.events()) {
                Placed enqueue = kernel.kind() == TraceEvent.Kind.KERNEL ? enqueues.get(kernel.id()) : null;
                if (enqueue == null) {
                    continue;
                }
                flowId++;
                flow("s", flowId, enqueue.track(), enqueue.event());
                flow("f", flowId, track, kernel);
            }
        }
    }

    private void flow(String phase, long id, Trace.Track track, TraceEvent at) throws IOException {
        json.beginObject().name("name").value(at.name()).name("cat").value("flow").name("ph").value(phase).name("id").value(id);
        if (phase.equals("f")) {
            json.name("bp").value("e");
        }
        json.name("ts").micros(at.start() - trace.origin()).name("pid").value(track.row().pid()).name("tid").value(track.tid())
            .endObject();
    }
}
