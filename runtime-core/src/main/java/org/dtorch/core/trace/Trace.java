package org.dtorch.core.trace;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What one {@link Tracer} session recorded, per thread: exported as Chrome trace event JSON
 * ({@link #writeChromeJson}) or summed per operator and collective ({@link #keyAverages}, {@link #table}).
 *
 * <p>Thread-safe: immutable.
 */
public final class Trace {
    /** One thread's events, in recording order, and the process row it belongs to. */
    record Track(Tracer.Row row, long tid, String threadName, List<TraceEvent> events) {
    }

    /**
     * The totals of one kind of event over the trace, as in torch.profiler's {@code key_averages()}.
     *
     * @param category   {@code kernel}, {@code device} (a CUDA kernel's device time), {@code collective}, {@code store},
     *                   {@code client} or {@code controller}
     * @param name       the operator's name, or the collective's or store call's
     * @param calls      how many times it ran, summed over devices
     * @param totalNanos the time it took, summed over calls
     * @param bytes      bytes the ranks contributed, summed: a collective's own, a kernel's those of the collectives it ran
     *                   (a redistribution's, implicit ones included); 0 otherwise
     */
    public record Summary(String category, String name, long calls, long totalNanos, long bytes) {
        /** Mean time per call, in microseconds. */
        public double meanMicros() {
            return calls == 0 ? 0 : totalNanos / 1000.0 / calls;
        }
    }

    /** A trace with no events. */
    public static final Trace EMPTY = new Trace(0, List.of());

    private final long origin;
    private final List<Track> tracks;

    Trace(long origin, List<Track> tracks) {
        this.origin = origin;
        this.tracks = List.copyOf(tracks);
    }

    /** The session's clock origin ({@link System#nanoTime()}): timestamps are exported relative to it. */
    long origin() {
        return origin;
    }

    List<Track> tracks() {
        return tracks;
    }

    /** How many events were recorded, over all threads. */
    public int eventCount() {
        return tracks.stream().mapToInt(t -> t.events().size()).sum();
    }

    /**
     * Writes the trace to {@code path} (replaced if it exists) as Chrome trace event JSON, which Perfetto
     * ({@code ui.perfetto.dev}) and {@code chrome://tracing} open.
     */
    public void writeChromeJson(Path path) throws IOException {
        Objects.requireNonNull(path, "path");
        try (Writer out = new BufferedWriter(Files.newBufferedWriter(path, StandardCharsets.UTF_8))) {
            writeChromeJson(out);
        }
    }

    /** Writes the trace to {@code out} as Chrome trace event JSON ({@link #writeChromeJson(Path)}); leaves it open. */
    public void writeChromeJson(Writer out) throws IOException {
        new ChromeTraceWriter(this, new JsonWriter(Objects.requireNonNull(out, "out"))).write();
    }

    /** The totals per category and name, the most time first. */
    public List<Summary> keyAverages() {
        Map<String, long[]> sums = new LinkedHashMap<>();
        Map<String, String[]> keys = new LinkedHashMap<>();
        for (Track track : tracks) {
            List<TraceEvent> events = track.events();
            for (int i = 0; i < events.size(); i++) {
                TraceEvent e = events.get(i);
                if (e.kind().instant) {
                    continue;
                }
                String key = e.kind().category + '\0' + e.name();
                keys.putIfAbsent(key, new String[] {e.kind().category, e.name()});
                long[] sum = sums.computeIfAbsent(key, k -> new long[3]);
                sum[0]++;
                sum[1] += e.end() - e.start();
                sum[2] += switch (e.kind()) {
                    case COLLECTIVE -> e.count();
                    case KERNEL -> nestedBytes(events, i);
                    default -> 0;
                };
            }
        }
        List<Summary> out = new ArrayList<>();
        sums.forEach((key, sum) -> out.add(new Summary(keys.get(key)[0], keys.get(key)[1], sum[0], sum[1], sum[2])));
        out.sort(Comparator.comparingLong(Summary::totalNanos).reversed());
        return out;
    }

    /**
     * The bytes of the collectives a kernel ran: those recorded on its thread before it (a kernel is recorded when it
     * ends) that started within it.
     */
    private static long nestedBytes(List<TraceEvent> events, int kernel) {
        TraceEvent k = events.get(kernel);
        long bytes = 0;
        for (int j = kernel - 1; j >= 0; j--) {
            TraceEvent e = events.get(j);
            if (e.start() < k.start()) {
                break;
            }
            if (e.kind() == TraceEvent.Kind.COLLECTIVE) {
                bytes += e.count();
            }
        }
        return bytes;
    }

    /** {@link #keyAverages()} as a text table, in the manner of torch.profiler's {@code key_averages().table()}. */
    public String table() {
        List<Summary> rows = keyAverages();
        int nameWidth = Math.max(4, rows.stream().mapToInt(r -> r.name().length()).max().orElse(0));
        String format = "%-" + nameWidth + "s  %-10s  %8s  %14s  %12s  %14s%n";
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(format, "Name", "Category", "Calls", "Total (us)", "Avg (us)", "Bytes"));
        sb.append("-".repeat(nameWidth + 70)).append('\n');
        for (Summary r : rows) {
            sb.append(String.format(format, r.name(), r.category(), r.calls(), String.format("%.1f", r.totalNanos() / 1000.0),
                String.format("%.2f", r.meanMicros()), r.bytes()));
        }
        return sb.toString();
    }
}
