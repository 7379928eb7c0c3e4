package org.dtorch.core.runtime.process;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.zip.CRC32C;
import org.dtorch.core.trace.Tracer;

/**
 * Frames on the socket between the controller and one worker (a Unix-domain socket on one host, TCP across nodes),
 * between the controller and a node agent of a run across nodes ({@code NODE_*}, {@code WORKER_EXIT},
 * {@code HEARTBEAT}), and between a standby worker and the reserve that keeps it ({@code STANDBY}, {@code ASSIGN}).
 *
 * <pre>
 *   frame := length:int  magic:int  type:byte  payload  crc:int
 *            length counts the bytes after itself; crc is CRC-32C over magic, type and payload
 * </pre>
 *
 * <p>A frame that is too short or too long, has the wrong magic (another protocol version), an unknown
 * type, or a checksum that does not match is a {@link ProtocolException}: the receiver never decodes its
 * payload. Frames are queued with {@link #queue} and written in batches by {@link #flush}, so a burst of
 * operators costs one system call.
 *
 * <p>While the tracer records, every {@code OPERATOR} and {@code DONE} frame queued or received is an instant event on
 * the calling thread's track ({@link Tracer#controlFrame}), numbered per type and direction so that the two ends of a
 * frame carry the same number.
 *
 * <p>Thread-safe: sending is synchronized; one thread receives.
 */
public final class ControlChannel implements AutoCloseable {
    /** {@code DTC1}: this version of the protocol. */
    public static final int MAGIC = 0x44544331;
    /** The largest frame accepted. */
    public static final int MAX_FRAME = 64 << 20;
    /** Length, magic and type: the bytes of a frame before its payload. */
    static final int HEADER = 4 + 4 + 1;

    /** Frame types. */
    public static final byte HELLO = 1;
    public static final byte OPERATOR = 2;
    public static final byte RELEASE = 3;
    public static final byte CANCEL = 4;
    public static final byte SHUTDOWN = 5;
    public static final byte DONE = 6;
    public static final byte FAILED = 7;
    public static final byte FATAL = 8;
    /** Controller to worker, in order with the operators: start recording a trace. */
    public static final byte TRACE_START = 9;
    /** Controller to worker, in order with the operators: stop recording once what came before ran, and send it. */
    public static final byte TRACE_STOP = 10;
    /** Worker to controller: {@code last:boolean} and a piece of its trace part (the pieces in order make the part). */
    public static final byte TRACE_EVENTS = 11;
    /** Node agent to controller, first on a node's connection: protocol, node rank, devices, pid, host name. */
    public static final byte NODE_HELLO = 12;
    /** Controller to node agent: the run's instance, configuration and addresses; start the workers. */
    public static final byte NODE_START = 13;
    /** Node agent to controller: the pid of each worker it started, by device. */
    public static final byte NODE_WORKERS = 14;
    /** Node agent to controller: a worker exited, with its status and last output. */
    public static final byte WORKER_EXIT = 15;
    /** Controller to node agent: kill the workers now. */
    public static final byte NODE_KILL = 16;
    /** Either way on a node's connection, every second: the sender is alive. */
    public static final byte HEARTBEAT = 17;
    /** Standby worker to its reserve, first on the connection: protocol version and pid; natives loaded, no run yet. */
    public static final byte STANDBY = 18;
    /** Reserve to standby worker: the run it joins, as system properties and the arguments of a fresh worker. */
    public static final byte ASSIGN = 19;
    private static final byte LAST_TYPE = ASSIGN;
    /** The largest payload a frame carries. */
    public static final int MAX_PAYLOAD = MAX_FRAME - HEADER;

    private final SocketChannel socket;
    private volatile String peer;
    private ByteBuffer out = ByteBuffer.allocate(64 * 1024);
    /** Bytes received and not yet taken, between position and limit: one read fetches many small frames. */
    private ByteBuffer in = ByteBuffer.allocate(256 * 1024).flip();
    private final CRC32C sendCrc = new CRC32C();
    private final CRC32C receiveCrc = new CRC32C();
    /** Frames queued and received so far, by type (the numbers of traced frames); guarded by this / the receiving thread. */
    private final long[] queued = new long[LAST_TYPE + 1];
    private final long[] received = new long[LAST_TYPE + 1];

    /** A channel over a connected socket; {@code peer} names the other side in errors. */
    public ControlChannel(SocketChannel socket, String peer) {
        this.socket = socket;
        this.peer = peer;
    }

    /** Renames the other side, for error messages (once it introduced itself). */
    public void setPeer(String name) {
        this.peer = name;
    }

    /** One received frame: its type and payload. */
    public record Frame(byte type, byte[] bytes, int offset, int length) {
        /** A reader over the payload. */
        public WireReader reader() {
            return new WireReader(bytes, offset, length);
        }
    }

    /** Queues a frame; {@link #flush} writes it. */
    public synchronized void queue(byte type, byte[] payload) {
        int frame = HEADER + payload.length + 4;
        if (frame - 4 > MAX_FRAME) {
            throw new IllegalArgumentException("a frame of " + payload.length + " bytes exceeds the " + MAX_FRAME + " byte limit");
        }
        if (out.remaining() < frame) {
            ByteBuffer bigger = ByteBuffer.allocate(Math.max(out.capacity() * 2, out.position() + frame));
            out.flip();
            bigger.put(out);
            out = bigger;
        }
        putFrame(out, MAGIC, type, payload, sendCrc);
        traced(type, true, ++queued[type], payload.length);
    }

    /**
     * Appends one frame in the layout above, magic {@code magic}, to {@code out} (which has room for it);
     * {@code crc} is the caller's scratch checksum.
     */
    static void putFrame(ByteBuffer out, int magic, byte type, byte[] payload, CRC32C crc) {
        int start = out.position();
        out.putInt(HEADER + payload.length).putInt(magic).put(type).put(payload);
        crc.reset();
        crc.update(out.array(), start + 4, HEADER - 4 + payload.length);
        out.putInt((int) crc.getValue());
    }

    /**
     * Checks the magic and the checksum of a received frame, {@code bytes} being everything after its length field
     * (at least magic, type and checksum), and returns its type; {@code crc} is the caller's scratch checksum.
     *
     * @throws ProtocolException naming {@code peer} if the magic differs or the checksum does not match
     */
    static byte checkFrame(byte[] bytes, int magic, CRC32C crc, String peer) {
        ByteBuffer body = ByteBuffer.wrap(bytes);
        int got = body.getInt(0);
        if (got != magic) {
            throw new ProtocolException("frame from " + peer + " has magic 0x" + Integer.toHexString(got) + ", expected 0x"
                + Integer.toHexString(magic) + " (another protocol version?)");
        }
        crc.reset();
        crc.update(bytes, 0, bytes.length - 4);
        if (body.getInt(bytes.length - 4) != (int) crc.getValue()) {
            throw new ProtocolException("frame from " + peer + " fails its checksum: corrupted");
        }
        return bytes[4];
    }

    /** Records a traced frame's passing (its type and direction, its number, its payload's bytes); nothing while off. */
    private void traced(byte type, boolean sent, long seq, int bytes) {
        if ((type == OPERATOR || type == DONE) && Tracer.enabled()) {
            Tracer.controlFrame(type == OPERATOR ? (sent ? "OPERATOR sent" : "OPERATOR received") : (sent ? "DONE sent" : "DONE received"),
                peer, seq, bytes);
        }
    }

    /** Writes every queued frame. */
    public synchronized void flush() throws IOException {
        if (out.position() == 0) {
            return;
        }
        out.flip();
        while (out.hasRemaining()) {
            socket.write(out);
        }
        out.clear();
        if (out.capacity() > 1 << 20) {
            out = ByteBuffer.allocate(64 * 1024);
        }
    }

    /** Queues and writes one frame. */
    public synchronized void send(byte type, byte[] payload) throws IOException {
        queue(type, payload);
        flush();
    }

    /** Bytes queued and not yet written. */
    public synchronized int queuedBytes() {
        return out.position();
    }

    /** True if frames are queued and not yet written. */
    public synchronized boolean hasQueued() {
        return out.position() > 0;
    }

    /**
     * Blocks for the next frame.
     *
     * @throws EOFException      when the peer closed the connection
     * @throws ProtocolException when the frame is not one this protocol accepts
     */
    public Frame receive() throws IOException {
        fill(4, true);
        int length = in.getInt();
        if (length < HEADER + 4 - 4 || length > MAX_FRAME) {
            throw new ProtocolException("frame from " + peer + " of " + length + " bytes: outside [" + (HEADER + 4 - 4) + ", " + MAX_FRAME + "]");
        }
        fill(length, false);
        byte[] bytes = new byte[length];
        in.get(bytes);
        byte type = checkFrame(bytes, MAGIC, receiveCrc, peer);
        if (type < HELLO || type > LAST_TYPE) {
            throw new ProtocolException("frame from " + peer + " has unknown type " + type);
        }
        traced(type, false, ++received[type], length - 9);
        return new Frame(type, bytes, 5, length - 9);
    }

    /** Reads until at least {@code n} bytes are buffered. */
    private void fill(int n, boolean atFrameStart) throws IOException {
        if (in.remaining() >= n) {
            return;
        }
        if (in.capacity() < n) {
            ByteBuffer bigger = ByteBuffer.allocate(n);
            bigger.put(in);
            in = bigger.flip();
        }
        in.compact();
        try {
            while (in.position() < n) {
                int read = socket.read(in);
                if (read < 0) {
                    if (atFrameStart && in.position() == 0) {
                        throw new EOFException(peer + " closed the control channel");
                    }
                    int got = in.position();
                    in.clear(); // nothing of the broken frame stays to be taken for the start of another
                    throw new ProtocolException("truncated frame from " + peer + ": the connection closed after " + got + " of "
                        + n + " bytes");
                }
            }
        } finally {
            in.flip();
        }
        if (in.capacity() > 4 << 20 && in.remaining() <= 256 * 1024) {
            in = ByteBuffer.allocate(256 * 1024).put(in).flip(); // a huge frame passed: give the memory back
        }
    }

    /** Tells the peer that nothing more will be sent (it reads end-of-stream after the last frame). */
    public synchronized void shutdownOutput() {
        try {
            socket.shutdownOutput();
        } catch (IOException ignored) {
            // the peer is gone already
        }
    }

    /**
     * Closes after the peer has read what was sent: stops sending, then discards what the peer still sends
     * until it closes too or {@code linger} passes. (Closing a Unix socket with unread input resets the
     * connection, and the peer could lose the last frames it had not read yet.)
     */
    public void closeGracefully(java.time.Duration linger) {
        try {
            socket.shutdownOutput();
            socket.configureBlocking(false);
            ByteBuffer sink = ByteBuffer.allocate(8192);
            long deadline = System.nanoTime() + linger.toNanos();
            while (System.nanoTime() < deadline) {
                sink.clear();
                int n = socket.read(sink);
                if (n < 0) {
                    break;
                }
                if (n == 0) {
                    Thread.sleep(1);
                }
            }
        } catch (IOException ignored) {
            // closing anyway
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            close();
        }
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }
}
