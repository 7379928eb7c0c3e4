package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import javax.crypto.Mac;

/**
 * The challenge-response that opens a control connection between nodes: each end proves that it holds the run's
 * {@link ClusterToken} without sending it, and the connection carries control frames only after both proofs.
 *
 * <pre>
 *   frames: ControlChannel's layout (length, magic, type, payload, CRC-32C) with magic DTA1, each of a fixed size
 *
 *   connector -> listener   CHALLENGE  nonceC:32
 *   listener  -> connector  PROOF      nonceL:32  mac(LISTENER):32
 *   connector -> listener   ANSWER     mac(CONNECTOR):32          (REFUSED, empty, if the PROOF was wrong)
 *   listener  -> connector  ACCEPTED   empty                      (REFUSED, empty, if the ANSWER was wrong)
 *
 *   mac(role) = HMAC-SHA256(token, "dtorch-control-v1" role:byte nonceC nonceL)
 * </pre>
 *
 * <p>Both nonces are fresh from {@link SecureRandom}, so an answer recorded on one connection is worth nothing on
 * another; the role byte keeps a listener's proof from being reflected as a connector's answer; the listener proves
 * first, so a connector computes nothing for a peer that has not proved itself. MACs are compared in constant time.
 * This authenticates the ends, it does not encrypt or protect what follows: someone who can relay or alter traffic
 * between the nodes still can (the network between nodes must be trusted, as for c10d's own ports).
 *
 * <p>Every read has the handshake's deadline, and the frame before it is checked (its exact length first, then magic
 * and checksum), so garbage, half a frame or silence from a client that is not ours fails as a {@link ProtocolException}
 * within the deadline, naming the peer and the phase; different tokens fail as a {@link WrongTokenException}. Writes are
 * a few dozen bytes, which the socket's send buffer takes without waiting for the peer.
 *
 * <p>Thread-safe: stateless; one thread runs one handshake on one socket.
 */
public final class ControlHandshake {
    /** {@code DTA1}: this version of the handshake. */
    static final int MAGIC = 0x44544131;
    static final int NONCE_BYTES = 32;
    static final int MAC_BYTES = 32;
    static final byte CHALLENGE = 1;
    static final byte PROOF = 2;
    static final byte ANSWER = 3;
    static final byte ACCEPTED = 4;
    static final byte REFUSED = 5;
    private static final byte LISTENER = 'L';
    private static final byte CONNECTOR = 'C';
    private static final byte[] DOMAIN = "dtorch-control-v1".getBytes(StandardCharsets.US_ASCII);
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final System.Logger LOG = System.getLogger(ControlHandshake.class.getName());

    private ControlHandshake() {
    }

    /**
     * Connects to the listener at {@code address} and runs the connector's side, all within {@code timeout}.
     *
     * @return the authenticated socket, which the caller owns: its read timeout is back to none, and its {@link
     *         Socket#getChannel() channel} is what a {@link ControlChannel} takes
     * @throws WrongTokenException if the listener holds another token
     * @throws ProtocolException   if the listener does not speak this handshake or misses the deadline
     * @throws IOException         if the connection fails
     */
    public static Socket connect(InetSocketAddress address, ClusterToken token, Duration timeout) throws IOException {
        long deadline = System.nanoTime() + timeout.toNanos();
        Socket socket = SocketChannel.open().socket();
        try {
            try {
                socket.connect(address, millisLeft(deadline));
            } catch (IOException e) {
                throw new IOException("cannot connect to the node at " + address + " (deadline " + timeout.toMillis() + " ms): " + e, e);
            }
            Conversation c = new Conversation(socket, deadline, timeout);
            byte[] nonceC = nonce();
            c.send(CHALLENGE, nonceC);
            ByteBuffer proof = ByteBuffer.wrap(c.receive(PROOF, NONCE_BYTES + MAC_BYTES, "the listener's proof"));
            byte[] nonceL = new byte[NONCE_BYTES];
            byte[] listenerMac = new byte[MAC_BYTES];
            proof.get(nonceL).get(listenerMac);
            if (!MessageDigest.isEqual(listenerMac, mac(token, LISTENER, nonceC, nonceL))) {
                c.refuse();
                throw wrongToken(c.peer, "presented a wrong token");
            }
            c.send(ANSWER, mac(token, CONNECTOR, nonceC, nonceL));
            c.receive(ACCEPTED, 0, "the listener's verdict");
            socket.setSoTimeout(0);
            return socket;
        } catch (IOException | RuntimeException e) {
            socket.close();
            throw e;
        }
    }

    /**
     * Runs the listener's side on a socket just accepted, within {@code timeout}. On success the socket is authenticated
     * (its read timeout is back to none); on failure the caller closes it.
     *
     * @throws WrongTokenException if the connector holds another token
     * @throws ProtocolException   if the connector does not speak this handshake or misses the deadline
     * @throws IOException         if the connection fails
     */
    public static void accept(Socket socket, ClusterToken token, Duration timeout) throws IOException {
        Conversation c = new Conversation(socket, System.nanoTime() + timeout.toNanos(), timeout);
        byte[] nonceC = c.receive(CHALLENGE, NONCE_BYTES, "the connector's challenge");
        byte[] nonceL = nonce();
        c.send(PROOF, ByteBuffer.allocate(NONCE_BYTES + MAC_BYTES).put(nonceL).put(mac(token, LISTENER, nonceC, nonceL)).array());
        byte[] connectorMac = c.receive(ANSWER, MAC_BYTES, "the connector's answer");
        if (!MessageDigest.isEqual(connectorMac, mac(token, CONNECTOR, nonceC, nonceL))) {
            c.refuse();
            throw wrongToken(c.peer, "presented a wrong token");
        }
        c.send(ACCEPTED, new byte[0]);
        socket.setSoTimeout(0);
    }

    private static WrongTokenException wrongToken(String peer, String what) {
        WrongTokenException e = new WrongTokenException("node at " + peer + " " + what);
        LOG.log(System.Logger.Level.WARNING, "control connection refused: " + e.getMessage());
        return e;
    }

    private static byte[] nonce() {
        byte[] nonce = new byte[NONCE_BYTES];
        RANDOM.nextBytes(nonce);
        return nonce;
    }

    private static byte[] mac(ClusterToken token, byte role, byte[] nonceC, byte[] nonceL) {
        Mac mac = token.newMac();
        mac.update(DOMAIN);
        mac.update(role);
        mac.update(nonceC);
        mac.update(nonceL);
        return mac.doFinal();
    }

    /** Milliseconds to {@code deadline}, at least 1 (0 would mean no timeout to a socket). */
    private static int millisLeft(long deadline) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
    }

    /** One handshake's frames on one socket, under one deadline. */
    private static final class Conversation {
        private final Socket socket;
        private final String peer;
        private final long deadline;
        private final Duration timeout;
        private final InputStream in;
        private final OutputStream out;
        private final CRC32C crc = new CRC32C();

        Conversation(Socket socket, long deadline, Duration timeout) throws IOException {
            this.socket = socket;
            this.peer = String.valueOf(socket.getRemoteSocketAddress());
            this.deadline = deadline;
            this.timeout = timeout;
            this.in = socket.getInputStream();
            this.out = socket.getOutputStream();
        }

        void send(byte type, byte[] payload) throws IOException {
            ByteBuffer frame = ByteBuffer.allocate(ControlChannel.HEADER + payload.length + 4);
            ControlChannel.putFrame(frame, MAGIC, type, payload, crc);
            out.write(frame.array());
            out.flush();
        }

        /** Tells the peer its proof failed, if it still listens: the refusal to report is ours either way. */
        void refuse() {
            try {
                send(REFUSED, new byte[0]);
            } catch (IOException gone) {
                // the peer hung up already
            }
        }

        /**
         * The payload of the next frame, which must be {@code type} with {@code payloadBytes} bytes, or REFUSED.
         *
         * @throws WrongTokenException if the peer refused our proof
         */
        byte[] receive(byte type, int payloadBytes, String phase) throws IOException {
            int length = ByteBuffer.wrap(readFully(4, phase)).getInt();
            if (length != ControlChannel.HEADER + payloadBytes && length != ControlChannel.HEADER) {
                throw new ProtocolException("handshake with " + peer + ", " + phase + ": a frame of " + length + " bytes, expected "
                    + (ControlChannel.HEADER + payloadBytes) + " (not a DTorch node?)");
            }
            byte[] body = readFully(length, phase);
            byte got = ControlChannel.checkFrame(body, MAGIC, crc, peer);
            if (got == REFUSED && length == ControlChannel.HEADER) {
                throw wrongToken(peer, "refused our token: the nodes hold different tokens");
            }
            if (got != type || length != ControlChannel.HEADER + payloadBytes) {
                throw new ProtocolException("handshake with " + peer + ", " + phase + ": a frame of type " + got + " and " + length
                    + " bytes, expected type " + type + " and " + (ControlChannel.HEADER + payloadBytes));
            }
            int payload = ControlChannel.HEADER - 4; // after magic and type
            return Arrays.copyOfRange(body, payload, payload + payloadBytes);
        }

        private byte[] readFully(int n, String phase) throws IOException {
            byte[] bytes = new byte[n];
            int got = 0;
            while (got < n) {
                if (deadline - System.nanoTime() <= 0) {
                    throw timedOut(phase, got, n);
                }
                socket.setSoTimeout(millisLeft(deadline));
                int read;
                try {
                    read = in.read(bytes, got, n - got);
                } catch (SocketTimeoutException e) {
                    throw timedOut(phase, got, n);
                }
                if (read < 0) {
                    throw new ProtocolException("handshake with " + peer + ": the connection closed while waiting for " + phase
                        + " (" + got + " of " + n + " bytes)");
                }
                got += read;
            }
            return bytes;
        }

        private ProtocolException timedOut(String phase, int got, int n) {
            return new ProtocolException("handshake with " + peer + ": waited " + timeout.toMillis() + " ms for " + phase + " ("
                + got + " of " + n + " bytes came)");
        }
    }
}
