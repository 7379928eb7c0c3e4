package org.dtorch.benchmarks;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousServer;

/**
 * One "node" of {@link RendezvousBenchmark}: {@code RendezvousBenchPeer <rank> <nodes> <host>}, a JVM of its own. It
 * prints {@code READY} once libtorch is loaded, then takes commands on its standard input:
 * <ul>
 *   <li>{@code GO <port> <key> <c10d|probe>}: node 0 starts a {@link RendezvousServer} on {@code host:port}; every node
 *       connects a {@code TCPStore} client to it and joins one Gloo group of {@code nodes} ranks over a
 *       {@code PrefixStore} of {@code key}. With {@code c10d} the other nodes leave it to c10d to retry while the server
 *       is not up yet; with {@code probe} they first wait for the port to accept a plain socket connection, tried every
 *       {@value #PROBE_MILLIS} ms. Prints {@code CONNECTED <server> <client> <group>}, the {@link System#nanoTime()} at
 *       which node 0's server was up (0 on the other nodes), its client connected and its group was joined.</li>
 *   <li>{@code END}: closes the group (and its client), node 0 the server too; prints {@code CLOSED}.</li>
 * </ul>
 * It exits at the end of its input.
 *
 * <p>Thread-safe: stateless; {@code main} runs on one thread.
 */
public final class RendezvousBenchPeer {
    private static final Duration TIMEOUT = Duration.ofSeconds(120);
    /** How often a node that probes for the server tries its port. */
    private static final long PROBE_MILLIS = 5;
    /** How long one probe may take to connect. */
    private static final int PROBE_CONNECT_MILLIS = 1_000;

    private RendezvousBenchPeer() {
    }

    public static void main(String[] args) throws Exception {
        int rank = Integer.parseInt(args[0]);
        int nodes = Integer.parseInt(args[1]);
        String host = args[2];
        torch.zeros(1).close(); // load libtorch before saying so: start-up is not measured
        System.out.println("READY");
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        RendezvousServer server = null;
        ProcessGroupGloo group = null;
        for (String line; (line = commands.readLine()) != null; ) {
            String[] words = line.split(" ");
            switch (words[0]) {
                case "GO" -> {
                    RendezvousAddress address = new RendezvousAddress(host, Integer.parseInt(words[1]));
                    long serverUp = 0;
                    if (rank == 0) {
                        server = RendezvousServer.start(host, address.port());
                        serverUp = System.nanoTime();
                    } else if (words[3].equals("probe")) {
                        awaitListening(address);
                    }
                    TCPStore client = DirectC10d.client(address, TIMEOUT);
                    long connected = System.nanoTime();
                    group = DirectC10d.glooGroup(client, words[2] + "/", rank, nodes, TIMEOUT);
                    System.out.println("CONNECTED " + serverUp + " " + connected + " " + System.nanoTime());
                }
                case "END" -> {
                    group.close();
                    if (server != null) {
                        server.close();
                    }
                    System.out.println("CLOSED");
                }
                default -> throw new IllegalArgumentException("unknown command: " + line);
            }
        }
        System.exit(0);
    }

    /** Returns once {@code address} accepts a TCP connection, trying every {@value #PROBE_MILLIS} ms, within the timeout. */
    private static void awaitListening(RendezvousAddress address) throws Exception {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (true) {
            try (Socket probe = new Socket()) {
                probe.connect(new InetSocketAddress(address.host(), address.port()), PROBE_CONNECT_MILLIS);
                return;
            } catch (IOException e) {
                if (System.nanoTime() > deadline) {
                    throw new IOException("the rendezvous " + address + " did not listen within " + TIMEOUT.toSeconds() + " s", e);
                }
                Thread.sleep(PROBE_MILLIS);
            }
        }
    }
}
