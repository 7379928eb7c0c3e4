package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.store.HostIdentity;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousClient;
import org.dtorch.core.communication.store.RendezvousServer;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.runtime.RuntimeOptions;

/**
 * The controller's side of a run across nodes (node 0): it serves the run's rendezvous (a c10d {@code TCPStore}) at the
 * master address, listens for authenticated control connections on an address of the same interface
 * ({@link ControlListener}, whose port it publishes in the rendezvous under {@value #CONTROL_KEY}), starts node 0's
 * workers itself, tells each other node's agent ({@link NodeAgent}) to start its own, and waits until every node and
 * every worker connected, at most the runtime's timeout: nodes may start in any order. Every worker, node 0's included,
 * connects over TCP and proves the run's token, so the control path is one whatever the node.
 *
 * <p>An agent whose configuration differs from node 0's is refused with a {@code FATAL} frame saying why, and the start
 * fails. A node that does not arrive fails the start at the deadline naming the missing node ranks; a worker that exits
 * while starting fails it with its output; a connection that fails the handshake is refused and logged (the listener goes
 * on), and named in the start's error if the run then does not assemble; a peer with a wrong token fails the start at
 * once, saying so.
 *
 * <p>Thread-safe: {@link #open} and {@link #start} from the runtime's constructor; the rest from any thread.
 */
final class NodeLaunch implements AutoCloseable {
    /**
     * The rendezvous key holding {@code controlHost:port<TAB>instanceId<TAB>machine}, the last node 0's
     * {@link HostIdentity#machine()}: an agent on the same machine shares node 0's shared memory and leaves its clean-up
     * to node 0.
     */
    static final String CONTROL_KEY = "dtorch/control";
    /** Version of the node protocol; an agent of another version is refused. */
    static final int PROTOCOL_VERSION = 1;
    /** System property: seconds of silence after which a node is lost; default {@value #DEFAULT_HEARTBEAT_TIMEOUT_SECONDS}. */
    static final String HEARTBEAT_TIMEOUT_PROPERTY = "dtorch.node.heartbeatTimeoutSeconds";
    static final long DEFAULT_HEARTBEAT_TIMEOUT_SECONDS = 10;
    /** How long the end of a run waits for the agents to close their connections first. */
    private static final Duration CLOSE_WAIT = Duration.ofSeconds(2);
    /** How long a peer has for the token handshake. */
    static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(10);
    private static final System.Logger LOG = System.getLogger(NodeLaunch.class.getName());

    private final RuntimeOptions options;
    private final NodeSpec spec;
    private final String instanceId;
    private final RendezvousServer rendezvous;
    private ControlListener listener;
    private final LinkedBlockingQueue<Socket> accepted = new LinkedBlockingQueue<>();
    private final List<ProtocolException> refused = new CopyOnWriteArrayList<>();
    private final Map<Integer, NodeLink> links = new ConcurrentHashMap<>();
    private final ScheduledExecutorService heartbeats = Executors.newSingleThreadScheduledExecutor(r -> Thread.ofPlatform().daemon()
        .name("dtorch-node-heartbeat").unstarted(r));

    private NodeLaunch(RuntimeOptions options, String instanceId, RendezvousServer rendezvous) {
        this.options = options;
        this.spec = options.nodes();
        this.instanceId = instanceId;
        this.rendezvous = rendezvous;
    }

    /**
     * Serves the rendezvous and the control port, and publishes the control port.
     *
     * @throws IllegalArgumentException if this process is not node 0
     * @throws CommException            if the master address cannot be served
     */
    static NodeLaunch open(RuntimeOptions options, String instanceId) {
        NodeSpec spec = options.nodes();
        if (spec.nodeRank() != 0) {
            throw new IllegalArgumentException("the controller runs on node 0; node " + spec.nodeRank() + " serves its devices with "
                + NodeAgent.class.getSimpleName());
        }
        RendezvousServer rendezvous = RendezvousServer.start(spec.master().host(), spec.master().port());
        NodeLaunch launch = new NodeLaunch(options, instanceId, rendezvous);
        try {
            launch.listener = ControlListener.open(new InetSocketAddress(spec.master().host(), 0), spec.token(), HANDSHAKE_TIMEOUT,
                launch.accepted::add, launch.refused::add);
            ControlListener listener = launch.listener;
            // From the first node on: an agent that joined counts the controller's silence while the others start.
            launch.heartbeats.scheduleAtFixedRate(launch::heartbeat, 1, 1, TimeUnit.SECONDS);
            try (RendezvousClient client = RendezvousClient.connect(rendezvous.address(), Deadline.after(options.timeout()), "node 0")) {
                client.set(CONTROL_KEY, new RendezvousAddress(spec.master().host(), listener.address().getPort()) + "\t" + instanceId + "\t"
                    + HostIdentity.machine());
            }
            return launch;
        } catch (IOException | RuntimeException e) {
            launch.close();
            throw e instanceof CommException c ? c : new CommException("cannot serve the control port of node 0 on "
                + spec.master().host() + ": " + e, e);
        }
    }

    /** The run's rendezvous, where promises of other nodes' devices are kept. */
    RendezvousAddress rendezvous() {
        return rendezvous.address();
    }

    /** Whether {@code device} is on another node than this one. */
    boolean isRemote(long device) {
        return spec.nodeOf(device) != spec.nodeRank();
    }

    /**
     * Starts node 0's workers, tells the other nodes to start theirs, and waits until all connected.
     *
     * @throws CommException naming what did not arrive or why a worker could not start (nothing is left running)
     */
    Map<Long, WorkerProcess> start(List<Device> devices, String failureBoard, LogicalGraph graph, OperatorEncoder encoder,
                                   WorkerProcess.Events events) {
        Deadline deadline = Deadline.after(options.timeout());
        Map<Long, WorkerProcess> workers = new LinkedHashMap<>();
        try {
            String control = new RendezvousAddress(spec.master().host(), listener.address().getPort()).toString();
            for (long id : spec.devicesOf(0)) {
                Device device = devices.get(Math.toIntExact(id));
                List<String> args = new ArrayList<>(List.of("--connect", control, "--failures", failureBoard, "--trace-part",
                    WorkerPool.tracePart(instanceId, device).toString()));
                args.addAll(WorkerPool.arguments(options, device, instanceId));
                Process process = WorkerPool.launch(device, args, workerProperties(instanceId, spec.master().host()), spec.token());
                workers.put(id, new WorkerProcess(device, new LocalWorkerLife(process, device.toString()), graph, encoder, events));
            }
            assemble(devices, workers, graph, encoder, events, control, deadline);
            return workers;
        } catch (RuntimeException e) {
            workers.values().forEach(WorkerProcess::destroy);
            links.values().forEach(NodeLink::killWorkers);
            throw e instanceof CommException c ? c : new CommException("cannot start the run of " + spec.nodes() + " nodes: " + e, e);
        }
    }

    /**
     * The system properties of a worker of a run across nodes: the run's instance, and, unless this JVM sets it, Gloo's
     * listening address: {@code nodeAddress}, the address by which the other nodes reach this one.
     */
    static Map<String, String> workerProperties(String instanceId, String nodeAddress) {
        Map<String, String> properties = new LinkedHashMap<>();
        properties.put(GlobalCommInstanceId.PROPERTY, instanceId);
        if (System.getProperty(ThreadGroupManager.GLOO_HOSTNAME_PROPERTY) == null) {
            properties.put(ThreadGroupManager.GLOO_HOSTNAME_PROPERTY, nodeAddress);
        }
        return properties;
    }

    /** Takes connections until every node and every worker connected, or the deadline. */
    private void assemble(List<Device> devices, Map<Long, WorkerProcess> workers, LogicalGraph graph, OperatorEncoder encoder,
                          WorkerProcess.Events events, String control, Deadline deadline) {
        int expected = devices.size();
        while (links.size() < spec.nodes() - 1 || attached(workers) < expected) {
            Socket socket;
            try {
                socket = accepted.poll(Math.min(50, Math.max(1, deadline.remainingNanos() / 1_000_000)), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommException("interrupted while the nodes of the run connected");
            }
            if (socket != null) {
                ControlChannel channel = new ControlChannel(socket.getChannel(), "a peer at " + socket.getRemoteSocketAddress());
                ControlChannel.Frame first;
                try {
                    first = WorkerPool.firstFrame(channel, deadline, "a peer at " + socket.getRemoteSocketAddress() + " connected but");
                } catch (CommTimeoutException e) {
                    throw new CommTimeoutException(missing(workers, expected, deadline), e); // the start's deadline: say what is missing
                }
                if (first.type() == ControlChannel.NODE_HELLO) {
                    NodeLink link = linkNode(channel, first, socket.getRemoteSocketAddress().toString());
                    for (Map.Entry<Long, RemoteWorkerLife> w : link.workers().entrySet()) {
                        Device device = devices.get(Math.toIntExact(w.getKey()));
                        workers.put(w.getKey(), new WorkerProcess(device, w.getValue(), graph, encoder, events));
                    }
                    sendStart(link, devices, control);
                    link.start();
                } else if (WorkerPool.attachHello(channel, first, workers).life() instanceof RemoteWorkerLife remote) {
                    remote.connected(channel);
                }
            }
            for (WorkerProcess w : workers.values()) {
                if (!w.isAlive()) {
                    WorkerDiedException lost = w.lost();
                    throw new CommException(lost != null ? "starting the run: " + lost.getMessage() : "the worker process of " + w.device()
                        + " (pid " + w.pid() + ") exited with status " + w.exitStatusNow() + " while starting; its output:\n" + w.outputTail());
                }
            }
            for (ProtocolException refusal : refused) {
                if (refusal instanceof WrongTokenException) {
                    throw new CommException("a node's control connection failed the token check (" + refusal.getMessage() + "); every node "
                        + "of the run needs the same token (" + ClusterToken.ENV + " or --token-file)", refusal);
                }
            }
            if (deadline.expired()) {
                throw new CommTimeoutException(missing(workers, expected, deadline));
            }
        }
    }

    private static int attached(Map<Long, WorkerProcess> workers) {
        return (int) workers.values().stream().filter(WorkerProcess::isAttached).count();
    }

    /** What the start waited for and did not get, for its timeout. */
    private String missing(Map<Long, WorkerProcess> workers, int expected, Deadline deadline) {
        TreeSet<Integer> absent = new TreeSet<>();
        for (int r = 1; r < spec.nodes(); r++) {
            if (!links.containsKey(r)) {
                absent.add(r);
            }
        }
        List<Long> silent = new ArrayList<>();
        for (Map.Entry<Long, WorkerProcess> w : workers.entrySet()) {
            if (!w.getValue().isAttached()) {
                silent.add(w.getKey());
            }
        }
        StringBuilder m = new StringBuilder("the run of " + spec.nodes() + " nodes at " + spec.master() + " did not assemble "
            + deadline.timedOutAfter() + ": ");
        if (!absent.isEmpty()) {
            m.append("node rank").append(absent.size() == 1 ? " " : "s ").append(absent).append(" never")
                .append(" arrived (").append(links.size()).append(" of ").append(spec.nodes() - 1).append(" other nodes connected)");
        } else {
            m.append("every node arrived, but the workers of devices ").append(silent).append(" did not connect (")
                .append(attached(workers)).append(" of ").append(expected).append(")");
        }
        if (!refused.isEmpty()) {
            m.append("; refused connections: ").append(String.join("; ", refused.stream().map(Throwable::getMessage).toList()));
        }
        return m.toString();
    }

    /** Checks a node agent's {@code NODE_HELLO} against this run and links it. */
    private NodeLink linkNode(ControlChannel channel, ControlChannel.Frame hello, String peer) {
        WireReader in = hello.reader();
        int version = in.getInt("node protocol version");
        int rank = in.getInt("node rank");
        int nodes = in.getInt("nodes");
        int perNode = in.getInt("devices per node");
        String kind = in.getString("device kind");
        long pid = in.getLong("agent pid");
        String host = in.getString("agent host");
        in.expectEnd("NODE_HELLO");
        String problem = null;
        if (version != PROTOCOL_VERSION) {
            problem = "speaks node protocol " + version + ", this controller " + PROTOCOL_VERSION;
        } else if (nodes != spec.nodes() || perNode != spec.devicesPerNode() || !kind.equals(options.deviceKind().shortName())) {
            problem = "was started with " + nodes + " nodes of " + kind + ":" + perNode + ", node 0 with " + spec.nodes() + " nodes of "
                + options.deviceKind().shortName() + ":" + spec.devicesPerNode();
        } else if (rank < 1 || rank >= spec.nodes()) {
            problem = "says it is node rank " + rank + ", not one of 1.." + (spec.nodes() - 1);
        } else if (links.containsKey(rank)) {
            problem = "says it is node rank " + rank + ", which " + links.get(rank).peer() + " is already";
        }
        if (problem != null) {
            CommException refused = new CommException("the node agent at " + peer + " (" + host + ", pid " + pid + ") " + problem
                + "; every node of a run gets the same --nnodes and --devices, and its own --node-rank");
            try {
                channel.send(ControlChannel.FATAL, new WireWriter().putString(refused.getMessage()).toByteArray()); // the agent says why
            } catch (IOException e) {
                LOG.log(System.Logger.Level.DEBUG, "cannot tell " + peer + " why it was refused: " + e);
            }
            channel.close();
            throw refused;
        }
        NodeLink link = new NodeLink(spec, rank, peer + " (" + host + ", agent pid " + pid + ")", channel, options.deviceKind());
        links.put(rank, link);
        LOG.log(System.Logger.Level.DEBUG, spec.describeNode(rank) + " connected from " + link.peer());
        return link;
    }

    /** Tells a node agent the run's instance and its workers' arguments. */
    private void sendStart(NodeLink link, List<Device> devices, String control) {
        WireWriter out = new WireWriter().putString(instanceId).putString(control).putInt(spec.devicesPerNode());
        for (long id : spec.devicesOf(link.rank())) {
            List<String> args = WorkerPool.arguments(options, devices.get(Math.toIntExact(id)), instanceId);
            out.putLong(id).putInt(args.size());
            args.forEach(out::putString);
        }
        if (!link.send(ControlChannel.NODE_START, out.toByteArray())) {
            throw new CommException(spec.describeNode(link.rank()) + " at " + link.peer() + " closed its connection before the start");
        }
    }

    private void heartbeat() {
        Duration timeout = Duration.ofSeconds(Long.getLong(HEARTBEAT_TIMEOUT_PROPERTY, DEFAULT_HEARTBEAT_TIMEOUT_SECONDS));
        links.values().forEach(l -> l.heartbeat(timeout));
    }

    /**
     * The run broke (a node or a worker was lost): every node still linked is told to end ({@code SHUTDOWN}), so that its
     * agent stops its workers, cleans its host up and exits, without waiting for the runtime to close. Idempotent.
     */
    void endRun() {
        links.values().forEach(NodeLink::shutdown);
    }

    /**
     * Ends the run on every node (their agents stop and exit; their connections are closed once they closed them, within
     * {@link #CLOSE_WAIT}), then stops serving. Idempotent.
     */
    @Override
    public void close() {
        heartbeats.shutdownNow();
        links.values().forEach(NodeLink::shutdown);
        if (listener != null) {
            listener.close();
        }
        for (Socket socket; (socket = accepted.poll()) != null; ) { // accepted after a failed start, never read
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }
        long agentsClosed = System.nanoTime() + CLOSE_WAIT.toNanos(); // one wait for all: they close at the same time
        links.values().forEach(link -> link.close(agentsClosed));
        rendezvous.close();
    }
}
