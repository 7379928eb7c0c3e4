package org.dtorch.python;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The frames between {@code ./dtorch run}'s client ({@link RunClient}) and the runtime server ({@link RunServer}) on
 * their Unix-domain socket. Every frame is a type byte, a length and that many bytes:
 *
 * <pre>
 *   +------+-------------+---------------------+
 *   | type | length (u32)| payload (length B)  |
 *   +------+-------------+---------------------+
 *     1 B     4 B, big-endian
 * </pre>
 *
 * <pre>
 *   client -> server                              server -> client
 *   REQUEST  version, cwd, args, environment      READY    a context waits for this run
 *   GO       the client commits to this run       DECLINE  reason: the client starts a JVM itself
 *   STDIN    bytes of the script's input          STDOUT   bytes the run wrote to standard output
 *   STDIN_EOF its input ended                     STDERR   bytes the run wrote to standard error
 *   SIGNAL   a signal number (2 INT, 15 TERM)     EXIT     the run's exit code (last frame)
 * </pre>
 *
 * <p>A run starts only after GO, so a client that gives up waiting for READY leaves nothing running. Strings are
 * UTF-8 with a length; a REQUEST's payload is {@code version, cwd, argc, args..., envc, (name, value)...}.
 *
 * <p>Not thread-safe: a {@link Writer} is shared by the threads that write, which synchronize on it.
 */
final class ServerWire {
    /** The protocol's version; a server answers a REQUEST of another with DECLINE. */
    static final int VERSION = 1;
    static final byte REQUEST = 1;
    static final byte GO = 2;
    static final byte STDIN = 3;
    static final byte STDIN_EOF = 4;
    static final byte SIGNAL = 5;
    static final byte READY = 10;
    static final byte DECLINE = 11;
    static final byte STDOUT = 12;
    static final byte STDERR = 13;
    static final byte EXIT = 14;
    /** The largest payload a reader accepts (a request with a large environment fits). */
    static final int MAX_PAYLOAD = 16 << 20;

    private ServerWire() {
    }

    /** One frame read. Thread-safe: immutable (the payload is not copied). */
    record Frame(byte type, byte[] payload) {
        int intPayload() throws IOException {
            return new DataInputStream(new java.io.ByteArrayInputStream(payload)).readInt();
        }

        String text() {
            return new String(payload, StandardCharsets.UTF_8);
        }
    }

    /** A run's request. Thread-safe: immutable. */
    record Request(int version, String cwd, List<String> args, Map<String, String> env) {
        byte[] encode() throws IOException {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(bytes);
            out.writeInt(version);
            writeString(out, cwd);
            out.writeInt(args.size());
            for (String arg : args) {
                writeString(out, arg);
            }
            out.writeInt(env.size());
            for (Map.Entry<String, String> e : env.entrySet()) {
                writeString(out, e.getKey());
                writeString(out, e.getValue());
            }
            return bytes.toByteArray();
        }

        static Request decode(byte[] payload) throws IOException {
            DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(payload));
            int version = in.readInt();
            if (version != VERSION) {
                return new Request(version, "", List.of(), Map.of());
            }
            String cwd = readString(in);
            int argc = in.readInt();
            List<String> args = new ArrayList<>();
            for (int i = 0; i < argc; i++) {
                args.add(readString(in));
            }
            int envc = in.readInt();
            Map<String, String> env = new LinkedHashMap<>();
            for (int i = 0; i < envc; i++) {
                env.put(readString(in), readString(in));
            }
            return new Request(version, cwd, List.copyOf(args), env);
        }
    }

    private static void writeString(DataOutputStream out, String value) throws IOException {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        out.writeInt(bytes.length);
        out.write(bytes);
    }

    private static String readString(DataInputStream in) throws IOException {
        int length = in.readInt();
        if (length < 0 || length > MAX_PAYLOAD) {
            throw new IOException("a string of " + length + " bytes in a request");
        }
        return new String(in.readNBytes(length), StandardCharsets.UTF_8);
    }

    static byte[] intPayload(int value) {
        return new byte[] {(byte) (value >>> 24), (byte) (value >>> 16), (byte) (value >>> 8), (byte) value};
    }

    /** The next frame, or null at the end of the stream before a frame began. */
    static Frame read(InputStream stream) throws IOException {
        DataInputStream in = new DataInputStream(stream);
        int type = in.read();
        if (type < 0) {
            return null;
        }
        int length = in.readInt();
        if (length < 0 || length > MAX_PAYLOAD) {
            throw new IOException("a frame of type " + type + " with " + length + " bytes");
        }
        byte[] payload = in.readNBytes(length);
        if (payload.length < length) {
            throw new EOFException("the stream ended inside a frame of type " + type);
        }
        return new Frame((byte) type, payload);
    }

    /** Writes whole frames; the threads of a run write through one, one frame at a time. */
    static final class Writer {
        private final DataOutputStream out;

        Writer(OutputStream stream) {
            this.out = new DataOutputStream(stream);
        }

        synchronized void write(byte type, byte[] payload, int offset, int length) throws IOException {
            out.writeByte(type);
            out.writeInt(length);
            out.write(payload, offset, length);
            out.flush();
        }

        void write(byte type, byte[] payload) throws IOException {
            write(type, payload, 0, payload.length);
        }
    }
}
