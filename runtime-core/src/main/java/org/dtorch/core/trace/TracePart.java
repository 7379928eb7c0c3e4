package org.dtorch.core.trace;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * A worker process's trace, written to a file when the worker ends and merged into the controller's session
 * ({@link Tracer#addPart}), or sent in {@code TRACE_EVENTS} frames when a window closes ({@link Tracer.Remote});
 * docs/observability.md, "Per-device-process mode".
 *
 * <p>Monotonic clocks of two JVMs have unrelated origins, but processes of one host share the wall clock. Both sides
 * measure {@code wall - nano} (the worker when it writes, the controller when it reads), and a worker time {@code t}
 * becomes {@code t + (wall - nano)_worker - (wall - nano)_controller} on the controller's clock: exact to the spacing of
 * the reads and to any step of the wall clock between the two measurements.
 *
 * <pre>
 *   part   := magic:int(DTP1)  wallMinusNano:long  tracks:int  track*
 *   track  := pid:int  rowName:str  tid:long  threadName:str  events:int  event*
 *   event  := kind:byte  name:str  start:long  end:long  id:long  count:long  a:opt  b:opt  c:opt
 *   str    := length:int  UTF-8 bytes          opt := present:boolean  [str]   (arguments travel as their strings)
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
public final class TracePart {
    private static final int MAGIC = 0x44545031;
    private static final int MAX_STRING = 1 << 20;
    private static final TraceEvent.Kind[] KINDS = TraceEvent.Kind.values();

    private TracePart() {
    }

    /** Writes {@code trace} to {@code file}, created new and readable by this user only. */
    public static void write(Trace trace, Path file) throws IOException {
        Files.write(Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"))),
            encode(trace));
    }

    /** {@code trace} as a part's bytes, with this process's {@code wall - nano} taken now. */
    public static byte[] encode(Trace trace) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(MAGIC);
            out.writeLong(wallMinusNano());
            out.writeInt(trace.tracks().size());
            for (Trace.Track track : trace.tracks()) {
                out.writeInt(track.row().pid());
                string(out, track.row().name());
                out.writeLong(track.tid());
                string(out, track.threadName());
                out.writeInt(track.events().size());
                for (TraceEvent e : track.events()) {
                    out.writeByte(e.kind().ordinal());
                    string(out, e.name());
                    out.writeLong(e.start());
                    out.writeLong(e.end());
                    out.writeLong(e.id());
                    out.writeLong(e.count());
                    optional(out, e.a());
                    optional(out, e.b());
                    optional(out, e.c());
                }
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e); // a byte array does not fail
        }
        return bytes.toByteArray();
    }

    /** The tracks of the part at {@code file}, their times moved to this process's {@link System#nanoTime()}. */
    static List<Trace.Track> read(Path file) throws IOException {
        return decode(Files.readAllBytes(file), file.toString());
    }

    /**
     * The tracks of a part's {@code bytes} (from {@code source}, for errors), their times moved to this process's
     * {@link System#nanoTime()}.
     */
    static List<Trace.Track> decode(byte[] bytes, String source) throws IOException {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            if (in.readInt() != MAGIC) {
                throw new IOException(source + " is not a trace part");
            }
            long shift = in.readLong() - wallMinusNano();
            int tracks = count(in, source);
            List<Trace.Track> out = new ArrayList<>(tracks);
            for (int t = 0; t < tracks; t++) {
                Tracer.Row row = new Tracer.Row(in.readInt(), string(in, source));
                long tid = in.readLong();
                String threadName = string(in, source);
                int events = count(in, source);
                List<TraceEvent> list = new ArrayList<>(events);
                for (int i = 0; i < events; i++) {
                    int kind = in.readUnsignedByte();
                    if (kind >= KINDS.length) {
                        throw new IOException(source + ": unknown event kind " + kind);
                    }
                    list.add(new TraceEvent(KINDS[kind], string(in, source), in.readLong() - shift, in.readLong() - shift,
                        in.readLong(), in.readLong(), optional(in, source), optional(in, source), optional(in, source)));
                }
                out.add(new Trace.Track(row, tid, threadName, list));
            }
            return out;
        }
    }

    /**
     * The wall clock minus {@link System#nanoTime()}, in nanoseconds: of a few tries, the one whose wall-clock read lies
     * between the closest pair of monotonic reads (a thread preempted between the reads would skew the difference).
     */
    private static long wallMinusNano() {
        long best = 0;
        long narrowest = Long.MAX_VALUE;
        for (int i = 0; i < 5; i++) {
            long before = System.nanoTime();
            Instant wall = Instant.now();
            long after = System.nanoTime();
            if (after - before < narrowest) {
                narrowest = after - before;
                best = wall.getEpochSecond() * 1_000_000_000L + wall.getNano() - (before + (after - before) / 2);
            }
        }
        return best;
    }

    private static void string(DataOutputStream out, String s) throws IOException {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    private static void optional(DataOutputStream out, Object value) throws IOException {
        out.writeBoolean(value != null);
        if (value != null) {
            string(out, value.toString());
        }
    }

    private static String string(DataInputStream in, String source) throws IOException {
        int length = in.readInt();
        if (length < 0 || length > MAX_STRING) {
            throw new IOException(source + ": a string of " + length + " bytes");
        }
        return new String(in.readNBytes(length), StandardCharsets.UTF_8);
    }

    private static String optional(DataInputStream in, String source) throws IOException {
        return in.readBoolean() ? string(in, source) : null;
    }

    private static int count(DataInputStream in, String source) throws IOException {
        int n = in.readInt();
        if (n < 0) {
            throw new IOException(source + ": a count of " + n);
        }
        return n;
    }
}
