package org.dtorch.python;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * The runtime server's standard streams: one process serves one run at a time, so its {@code System.out} and
 * {@code System.err} (which the launcher, the runtime's loggers and Python write to) are routed to the current run's
 * client, as STDOUT and STDERR frames, and to the server's log between runs.
 *
 * <p>Thread-safe: any thread may write; a run's frames are written whole, one at a time.
 */
final class ServerStreams {
    private static volatile ServerWire.Writer current;
    private static volatile Input currentInput;
    private static volatile boolean muted;

    private ServerStreams() {
    }

    /**
     * Routes the output to {@code writer} (null: back to the log) and the input of prepared contexts to {@code input}
     * (null: an input that has ended); unmutes the output.
     */
    static void route(ServerWire.Writer writer, Input input) {
        muted = false;
        current = writer;
        currentInput = input;
    }

    /** Standard input for a context prepared before its run: the current run's input, or none between runs. */
    static InputStream routedInput() {
        return new InputStream() {
            @Override
            public int read() throws IOException {
                Input input = currentInput;
                return input == null ? -1 : input.read();
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                Input input = currentInput;
                return input == null ? -1 : input.read(b, off, len);
            }

            @Override
            public int available() {
                Input input = currentInput;
                return input == null ? 0 : input.available();
            }
        };
    }

    /** Drops what the run writes from now on: a stopped run prints nothing more, as a JVM that was stopped prints nothing. */
    static void mute() {
        muted = true;
    }

    /** Output that goes to the current run's client as frames of {@code type}, or to {@code log} between runs. */
    static OutputStream routed(byte type, OutputStream log) {
        return new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                ServerWire.Writer writer = current;
                if (writer == null) {
                    log.write(b, off, len);
                    return;
                }
                if (muted || len == 0) {
                    return;
                }
                try {
                    writer.write(type, b, off, len);
                } catch (IOException e) {
                    // the client is gone; the run is being stopped
                }
            }

            @Override
            public void flush() throws IOException {
                if (current == null) {
                    log.flush();
                }
            }
        };
    }

    /**
     * A run's standard input, fed by the client's STDIN frames; reads block until bytes come or the input ends (the
     * client's end of input, or the run stopping).
     */
    static final class Input extends InputStream {
        private static final byte[] END = new byte[0];
        private final LinkedBlockingQueue<byte[]> chunks = new LinkedBlockingQueue<>();
        private byte[] chunk;
        private int position;
        private boolean ended;

        void feed(byte[] bytes) {
            if (bytes.length > 0) {
                chunks.add(bytes);
            }
        }

        void end() {
            chunks.add(END);
        }

        @Override
        public synchronized int read() throws IOException {
            byte[] one = new byte[1];
            int n = read(one, 0, 1);
            return n < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public synchronized int read(byte[] b, int off, int len) throws IOException {
            if (len == 0) {
                return 0;
            }
            if (chunk == null || position == chunk.length) {
                if (ended) {
                    return -1;
                }
                try {
                    chunk = chunks.take(); // no deadline: a script may wait for its input as long as it likes
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new InterruptedIOException("the run was stopped while it read its standard input");
                }
                position = 0;
                if (chunk == END) {
                    ended = true;
                    return -1;
                }
            }
            int n = Math.min(len, chunk.length - position);
            System.arraycopy(chunk, position, b, off, n);
            position += n;
            return n;
        }

        @Override
        public synchronized int available() {
            return chunk == null ? 0 : chunk.length - position;
        }
    }
}
