package org.dtorch.core.runtime.process;

import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.store.HostIdentity;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousClient;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.shm.SharedRegion;

/**
 * What a node other than node 0 runs in a run across nodes: it finds the controller through the run's rendezvous (node
 * 0's {@code TCPStore} at the master address, waiting for it up to the timeout, so nodes may start in any order),
 * connects to its control port proving the run's token, starts one worker process per device of this node when told
 * ({@code NODE_START}), reports their pids and exits, and exchanges a heartbeat every second.
 *
 * <p>It ends with {@link #EXIT_DONE} when the controller ends the run ({@code SHUTDOWN}); with {@link #EXIT_CONTROLLER_GONE}
 * when the controller's connection closes or stays silent past the heartbeat timeout (its workers are killed); with
 * {@link #EXIT_START_FAILED} when it cannot join (no rendezvous by the deadline, a wrong token, a refused configuration).
 * Whatever the end, the shared memory of the run on this host and its workers' failure board are removed.
 *
 * <p>Not thread-safe: one agent per process, run by {@link #serve} on the calling thread.
 */
public final class NodeAgent {
    /** The controller ended the run. */
    public static final int EXIT_DONE = 0;
    /** The controller's connection closed or went silent: the controller or its host died. */
    public static final int EXIT_CONTROLLER_GONE = 1;
    /** The node could not join the run. */
    public static final int EXIT_START_FAILED = 2;
    private static final System.Logger LOG = System.getLogger(NodeAgent.class.getName());
    /** How long workers have to exit after the run ended before they are killed. */
    private static final Duration WORKER_EXIT_GRACE = Duration.ofSeconds(5);

    private final NodeSpec spec;
    private final DeviceKind kind;
    private final Duration timeout;
    private final Map<Long, LocalWorkerLife> workers = new LinkedHashMap<>();
    private ControlChannel channel;
    private String instanceId;
    private SharedFailureBoard board;
    /** The address by which the controller (and so the other nodes) reach this node. */
    private String address;
    private volatile long lastHeardNanos = System.nanoTime();
    /** Set by the heartbeat when it closes a silent controller's connection: the read that fails then reports silence. */
    private volatile boolean silenced;
    /** This node is on node 0's machine (a test): node 0 removes the run's shared memory, which this node shares. */
    private boolean sharesNodeZeroMemory;

    private NodeAgent(NodeSpec spec, DeviceKind kind, Duration timeout) {
        this.spec = spec;
        this.kind = kind;
        this.timeout = timeout;
    }

    /**
     * Serves node {@code spec.nodeRank()} (not 0) of a run until it ends; {@code timeout} bounds the wait for the other
     * nodes at the start.
     *
     * @return the exit status ({@link #EXIT_DONE}, {@link #EXIT_CONTROLLER_GONE} or {@link #EXIT_START_FAILED}); the
     *         reason is logged and printed on standard error
     */
    public static int serve(NodeSpec spec, DeviceKind kind, Duration timeout) {
        if (spec.nodeRank() == 0) {
            throw new IllegalArgumentException("node 0 runs the controller, not a node agent");
        }
        return new NodeAgent(spec, kind, timeout).run();
    }

    /**
     * Runs a node agent from the command line: {@code --nnodes N --node-rank R --master HOST:PORT --devices cpu:K|cuda:K
     * --timeout-seconds S}, the token in the environment variable {@value ClusterToken#ENV}; exits with {@link #serve}'s
     * status. ({@code dtorch run --nnodes N --node-rank R ...} is the launcher's way to the same.)
     */
    public static void main(String[] args) {
        Map<String, String> options = WorkerMain.parse(args, List.of("nnodes", "node-rank", "master", "devices", "timeout-seconds"));
        String[] devices = options.get("devices").split(":");
        DeviceKind kind = DeviceKind.valueOf(devices[0].toUpperCase(java.util.Locale.ROOT));
        int nodes = Integer.parseInt(options.get("nnodes"));
        ClusterToken token = ClusterToken.resolve(nodes, null, System.getenv()).orElseThrow();
        NodeSpec spec = new NodeSpec(nodes, Integer.parseInt(options.get("node-rank")), RendezvousAddress.parse(options.get("master")), token,
            Integer.parseInt(devices[1]));
        System.exit(serve(spec, kind, Duration.ofSeconds(Long.parseLong(options.get("timeout-seconds")))));
    }

    /**
     * A command that runs node {@code rank}'s agent in a JVM of this class path ({@link #main}), the token in its
     * environment; {@code properties} are its system properties (a {@code dtorch.host.id} of its own, say).
     */
    public static ProcessBuilder command(int nodes, int rank, RendezvousAddress master, String devices, Duration timeout,
                                        ClusterToken token, Map<String, String> properties) {
        ProcessBuilder builder = JvmCommand.of(NodeAgent.class.getName(), List.of("--nnodes", String.valueOf(nodes), "--node-rank",
            String.valueOf(rank), "--master", master.toString(), "--devices", devices, "--timeout-seconds",
            String.valueOf(Math.max(1, timeout.toSeconds()))), properties, List.of("-Xmx256m")).processBuilder();
        token.exportTo(builder.environment());
        return builder;
    }

    private String me() {
        return spec.describeNode(spec.nodeRank());
    }

    private int run() {
        ScheduledExecutorService heartbeats = Executors.newSingleThreadScheduledExecutor(r -> Thread.ofPlatform().daemon()
            .name("dtorch-node-heartbeat").unstarted(r));
        try {
            try {
                join();
            } catch (IOException | RuntimeException e) {
                fail("cannot join the run at " + spec.master() + ": " + e.getMessage());
                return EXIT_START_FAILED;
            }
            Duration heartbeatTimeout = Duration.ofSeconds(Long.getLong(NodeLaunch.HEARTBEAT_TIMEOUT_PROPERTY,
                NodeLaunch.DEFAULT_HEARTBEAT_TIMEOUT_SECONDS));
            lastHeardNanos = System.nanoTime(); // silence is counted from the start of the run, not from this process's
            heartbeats.scheduleAtFixedRate(() -> heartbeat(heartbeatTimeout), 1, 1, TimeUnit.SECONDS);
            String why = serveControl();
            if (why == null) {
                awaitWorkers();
                return EXIT_DONE;
            }
            fail(why + "; killing this node's workers");
            return EXIT_CONTROLLER_GONE;
        } finally {
            heartbeats.shutdownNow();
            workers.values().forEach(LocalWorkerLife::destroy);
            cleanUp();
        }
    }

    /** Finds the controller, connects, introduces this node, and starts the workers when told. */
    private void join() throws IOException {
        Deadline deadline = Deadline.after(timeout);
        String published;
        try (RendezvousClient rendezvous = RendezvousClient.connect(spec.master(), deadline, me())) {
            published = rendezvous.await(NodeLaunch.CONTROL_KEY, deadline, "node 0 to publish its control port");
        }
        String[] fields = published.split("\t");
        if (fields.length != 3) {
            throw new CommException("the rendezvous at " + spec.master() + " holds '" + published + "' under " + NodeLaunch.CONTROL_KEY
                + ", not a control address of this version");
        }
        RendezvousAddress control = RendezvousAddress.parse(fields[0]);
        sharesNodeZeroMemory = fields[2].equals(HostIdentity.machine());
        Duration handshake = timeout.compareTo(NodeLaunch.HANDSHAKE_TIMEOUT) < 0 ? timeout : NodeLaunch.HANDSHAKE_TIMEOUT;
        Socket socket = ControlHandshake.connect(new InetSocketAddress(control.host(), control.port()), spec.token(), handshake);
        channel = new ControlChannel(socket.getChannel(), "the controller at " + control);
        address = socket.getLocalAddress().getHostAddress(); // this node's address on the run's network
        channel.send(ControlChannel.NODE_HELLO, new WireWriter().putInt(NodeLaunch.PROTOCOL_VERSION).putInt(spec.nodeRank())
            .putInt(spec.nodes()).putInt(spec.devicesPerNode()).putString(kind.shortName()).putLong(ProcessHandle.current().pid())
            .putString(hostName()).toByteArray());
        ControlChannel.Frame start = WorkerPool.firstFrame(channel, deadline, "the controller at " + control + " accepted " + me() + " but");
        if (start.type() == ControlChannel.FATAL) {
            throw new CommException("the controller at " + control + " refused " + me() + ": " + start.reader().getString("refusal"));
        }
        if (start.type() != ControlChannel.NODE_START) {
            throw new CommException("the controller at " + control + " answered " + me() + " with a frame of type " + start.type()
                + " instead of NODE_START");
        }
        startWorkers(start.reader());
    }

    private void startWorkers(WireReader in) throws IOException {
        instanceId = in.getString("instance id");
        String control = in.getString("control address");
        int count = in.getCount("devices", spec.devicesPerNode());
        board = SharedFailureBoard.create(SharedRegion.PREFIX + instanceId + "-node" + spec.nodeRank() + "-failures");
        WireWriter started = new WireWriter().putInt(count);
        for (int i = 0; i < count; i++) {
            long id = in.getLong("device");
            int n = in.getCount("argument count", 256);
            List<String> args = new ArrayList<>(List.of("--connect", control, "--failures", board.name()));
            for (int a = 0; a < n; a++) {
                args.add(in.getString("argument"));
            }
            Device device = new Device(kind, Math.toIntExact(id));
            Process process = WorkerPool.launch(device, args, NodeLaunch.workerProperties(instanceId, address), spec.token());
            LocalWorkerLife life = new LocalWorkerLife(process, device.toString());
            workers.put(id, life);
            started.putLong(id).putLong(life.pid());
            life.onExit().thenAccept(status -> reportExit(id, status, life.outputTail()));
        }
        in.expectEnd("NODE_START");
        channel.send(ControlChannel.NODE_WORKERS, started.toByteArray());
    }

    private void reportExit(long device, int status, String output) {
        try {
            channel.send(ControlChannel.WORKER_EXIT, new WireWriter().putLong(device).putInt(status).putString(output).toByteArray());
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, me() + ": cannot report the exit of device " + device + "'s worker: " + e);
        }
    }

    /** Serves the controller's frames until the run ends; null when the controller ended it, else why this node stops. */
    private String serveControl() {
        try {
            while (true) {
                ControlChannel.Frame frame = channel.receive();
                lastHeardNanos = System.nanoTime();
                switch (frame.type()) {
                    case ControlChannel.HEARTBEAT -> frame.reader().expectEnd("HEARTBEAT");
                    case ControlChannel.NODE_KILL -> workers.values().forEach(LocalWorkerLife::destroy);
                    case ControlChannel.SHUTDOWN -> {
                        return null;
                    }
                    default -> throw new ProtocolException("the controller sent a frame of type " + frame.type()
                        + ", which a node agent does not take");
                }
            }
        } catch (EOFException e) {
            return "the controller's control connection closed (the controller exited or was killed)";
        } catch (IOException | RuntimeException e) {
            return silenced ? "the controller fell silent" : "the controller's control connection broke: " + e.getMessage();
        }
    }

    private void heartbeat(Duration timeout) {
        long silent = System.nanoTime() - lastHeardNanos;
        if (silent > timeout.toNanos()) {
            silenced = true; // serveControl's read fails once the channel closes: report silence, not a break
            LOG.log(System.Logger.Level.ERROR, me() + ": no heartbeat from the controller for " + silent / 1_000_000 + " ms");
            channel.close();
            return;
        }
        try {
            channel.send(ControlChannel.HEARTBEAT, new byte[0]);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, me() + ": cannot send a heartbeat: " + e);
        }
    }

    /** The run ended: the workers exit on the controller's SHUTDOWN; those that do not within the grace are killed. */
    private void awaitWorkers() {
        for (LocalWorkerLife w : workers.values()) {
            try {
                w.waitFor(WORKER_EXIT_GRACE);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Removes the run's shared memory on this host: the failure board, and whatever a killed worker's stores left. */
    private void cleanUp() {
        if (channel != null) {
            channel.close();
        }
        if (board != null) {
            board.unlink();
            board.close();
        }
        if (instanceId != null) {
            try {
                for (LocalWorkerLife w : workers.values()) {
                    w.waitFor(Duration.ofSeconds(2));
                }
                if (!sharesNodeZeroMemory) {
                    SharedRegion.unlinkAll(SharedRegion.PREFIX + instanceId + "-");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, me() + ": cannot remove the run's shared memory: " + e);
            }
        }
    }

    private void fail(String why) {
        LOG.log(System.Logger.Level.ERROR, me() + ": " + why);
        System.err.println("dtorch: " + me() + ": " + why);
    }

    private static String hostName() {
        try {
            return java.net.InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return "unknown host";
        }
    }
}
