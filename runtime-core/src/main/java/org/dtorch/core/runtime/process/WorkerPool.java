package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.runtime.RuntimeOptions;



import org.dtorch.core.shm.OwnedPaths;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.trace.Tracer;

/**
 * Starts the worker processes of a per-device-process runtime and connects them: a Unix-domain socket in
 * a directory of its own (mode 0700, so no other user can connect, whatever the socket's mode) in the
 * shared-memory directory, one JVM per device running {@link WorkerMain}, and a
 * {@code HELLO} from each within the startup timeout (property {@value #STARTUP_PROPERTY}, seconds,
 * default {@value #DEFAULT_STARTUP_SECONDS}). A worker that exits or does not report in time fails the
 * start with its output; nothing is left running. Where this process installed a {@link StandbyWorkers} reserve, the
 * runtime adopts its workers prepared for this configuration instead of launching new ones.
 *
 * <p>Not thread-safe: the runtime's constructor uses it once.
 */
final class WorkerPool {
    /** System property: seconds every worker has to start and connect. */
    static final String STARTUP_PROPERTY = "dtorch.worker.startupSeconds";
    static final long DEFAULT_STARTUP_SECONDS = 120;
    /** Version of the control protocol; a worker of another version is refused. */
    static final int PROTOCOL_VERSION = 4;

    private WorkerPool() {
    }

    /** The socket's path for {@code instanceId}: {@code dtorch-<instance>-ctl/sock}, short enough for a socket's address. */
    static Path socketPath(String instanceId) {
        return SharedRegion.checkedDirectory().resolve(SharedRegion.PREFIX + instanceId + "-ctl").resolve("sock");
    }

    /**
     * Starts and connects one worker per device.
     *
     * @throws CommException if a worker cannot start or connect in time (the others are killed)
     */
    static Map<Long, WorkerProcess> start(RuntimeOptions options, List<Device> devices, String instanceId, String failureBoard,
                                          LogicalGraph graph, OperatorEncoder encoder, WorkerProcess.Events events) {
        Path socket = socketPath(instanceId);
        Map<Long, WorkerProcess> workers = new LinkedHashMap<>();
        boolean madeDirectory = false;
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            OwnedPaths.createPrivateDirectory(socket.getParent(), "control socket's directory");
            madeDirectory = true;
            server.bind(UnixDomainSocketAddress.of(socket));
            Duration startup = Duration.ofSeconds(Long.getLong(STARTUP_PROPERTY, DEFAULT_STARTUP_SECONDS));
            List<Process> adopted = adoptStandby(options, devices, instanceId, failureBoard, socket, Deadline.after(startup));
            for (int i = 0; i < devices.size(); i++) {
                Device device = devices.get(i);
                Process process = adopted != null && adopted.get(i) != null ? adopted.get(i)
                    : spawn(options, device, instanceId, failureBoard, socket);
                workers.put((long) device.index(), new WorkerProcess(device, new LocalWorkerLife(process, device.toString()),
                    graph, encoder, events));
            }
            Deadline deadline = Deadline.after(startup);
            connectAll(server, workers, deadline);
            return workers;
        } catch (IOException | RuntimeException e) {
            workers.values().forEach(WorkerProcess::destroy);
            if (e instanceof CommException ce) {
                throw ce;
            }
            throw new CommException("cannot start the worker processes of runtime " + instanceId + ": " + e, e);
        } finally {
            try {
                if (madeDirectory) {
                    Files.deleteIfExists(socket);
                    Files.deleteIfExists(socket.getParent());
                }
            } catch (IOException ignored) {
                // the janitor removes it later
            }
        }
    }

    /**
     * The {@link WorkerMain} arguments of {@code device}'s worker. Its device travels as the logical index, the kind and
     * the physical index ({@link RuntimeOptions#physicalDevice}: {@code cuda:0} for every rank with {@code sameDevice}).
     * The worker inherits this process's environment, {@code CUDA_VISIBLE_DEVICES} included, so it numbers the GPUs as
     * this process and every other worker does: CUDA IPC descriptors name the producer's device index, which a
     * consumer with another numbering would read as another GPU.
     */
    static List<String> arguments(RuntimeOptions options, Device device, String instanceId, String failureBoard, Path socket) {
        List<String> args = new ArrayList<>(List.of("--socket", socket.toString(), "--failures", failureBoard));
        args.addAll(arguments(options, device, instanceId));
        return args;
    }

    /**
     * The arguments every worker of {@code device} gets, wherever it runs: all but its control connection and its
     * failure board, which are its host's; across nodes, the run's rendezvous.
     */
    static List<String> arguments(RuntimeOptions options, Device device, String instanceId) {
        Device physical = options.physicalDevice(device);
        List<String> args = List.of("--device", String.valueOf(device.index()), "--device-kind",
            device.kind().shortName(), "--physical-device", String.valueOf(physical.index()), "--devices",
            String.valueOf(options.deviceCount()), "--instance", instanceId, "--timeout-ms",
            String.valueOf(options.timeout().toMillis()), "--same-device", String.valueOf(options.sameDevice()), "--memory-growth-syncs",
            String.valueOf(options.memoryWatch().growthSyncs()), "--memory-growth-floor", String.valueOf(options.memoryWatch().floorBytes()),
            "--trace-from-start", String.valueOf(Tracer.enabled()));
        if (options.nodes() != null) {
            args = new ArrayList<>(args);
            args.addAll(List.of("--rendezvous", options.nodes().master().toString()));
        }
        return args;
    }

    /**
     * Where {@code device}'s worker writes its trace if it still records when it ends (the runtime started while the
     * tracer recorded, or closed inside a window): beside the runtime's shared memory, whose clean-up removes what a
     * killed worker left.
     */
    static Path tracePart(String instanceId, Device device) {
        return SharedRegion.pathOf(SharedRegion.PREFIX + instanceId + "-trace-" + device.index());
    }

    private static Process spawn(RuntimeOptions options, Device device, String instanceId, String failureBoard, Path socket) {
        return launch(device, spawnArguments(options, device, instanceId, failureBoard, socket), spawnProperties(instanceId), null);
    }

    /** The arguments of {@code device}'s worker on this host: its connection, failure board and trace part included. */
    private static List<String> spawnArguments(RuntimeOptions options, Device device, String instanceId, String failureBoard, Path socket) {
        List<String> args = new ArrayList<>(arguments(options, device, instanceId, failureBoard, socket));
        args.addAll(List.of("--trace-part", tracePart(instanceId, device).toString()));
        return args;
    }

    /** The system properties a worker of runtime {@code instanceId} gets beyond the inherited ones. */
    private static Map<String, String> spawnProperties(String instanceId) {
        return Map.of(GlobalCommInstanceId.PROPERTY, instanceId);
    }

    /**
     * The processes of the installed {@link StandbyWorkers} reserve's set for this runtime, each sent its device's
     * arguments, in the order of {@code devices}; null when there is no reserve or no set for this configuration (every
     * worker is then launched fresh), and a null entry for a worker that could not take its assignment (it is killed,
     * and that device's worker is launched fresh: the others have their run already).
     */
    private static List<Process> adoptStandby(RuntimeOptions options, List<Device> devices, String instanceId, String failureBoard,
                                              Path socket, Deadline deadline) {
        StandbyWorkers reserve = StandbyWorkers.installed();
        if (reserve == null) {
            return null;
        }
        List<StandbyWorkers.Standby> standby = reserve.take(standbyConfiguration(options), deadline);
        if (standby == null) {
            return null;
        }
        List<Process> processes = new ArrayList<>();
        for (int i = 0; i < devices.size(); i++) {
            StandbyWorkers.Standby worker = standby.get(i);
            try {
                worker.assign(new WorkerStandby.Assignment(spawnProperties(instanceId),
                    spawnArguments(options, devices.get(i), instanceId, failureBoard, socket)));
                processes.add(worker.process());
            } catch (IOException | RuntimeException e) {
                reserve.assignmentFailed(worker, devices.get(i), e);
                worker.process().destroyForcibly();
                processes.add(null);
            }
        }
        return processes;
    }

    /** What a standby worker of this runtime must have been made for: the command {@link #launch} runs, but its arguments. */
    static StandbyWorkers.Configuration standbyConfiguration(RuntimeOptions options) {
        return new StandbyWorkers.Configuration(options.deviceCount(), options.deviceKind(), workerCommand(List.of(), Map.of()));
    }

    private static JvmCommand workerCommand(List<String> args, Map<String, String> properties) {
        return JvmCommand.of(WorkerMain.class.getName(), args, properties, List.of("-Xmx" + System.getProperty("dtorch.worker.heap", "1g")));
    }

    /**
     * Starts a worker JVM with {@code args} and the system {@code properties} (the runtime's instance id among them); with
     * a {@code token} (a worker that connects across nodes) the token goes into its environment, never on its command
     * line. Its output is merged into one stream.
     */
    static Process launch(Device device, List<String> args, Map<String, String> properties, ClusterToken token) {
        ProcessBuilder builder = workerCommand(args, properties).processBuilder();
        builder.redirectErrorStream(true);
        if (token != null) {
            token.exportTo(builder.environment());
        }
        try {
            return builder.start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start the worker process of " + device, e);
        }
    }

    private static void connectAll(ServerSocketChannel server, Map<Long, WorkerProcess> workers, Deadline deadline) throws IOException {
        server.configureBlocking(false);
        int connected = 0;
        while (connected < workers.size()) {
            SocketChannel accepted = server.accept();
            if (accepted != null) {
                accepted.configureBlocking(true);
                attach(new ControlChannel(accepted, "a worker"), workers, deadline);
                connected++;
                continue;
            }
            for (WorkerProcess w : workers.values()) {
                if (!w.isAlive()) {
                    throw new CommException("the worker process of " + w.device() + " (pid " + w.pid() + ") exited with status "
                        + w.exitStatusNow() + " while starting; its output:\n" + w.outputTail());
                }
            }
            if (deadline.expired()) {
                StringBuilder output = new StringBuilder();
                workers.values().forEach(w -> output.append("\n").append(w.device()).append(" (pid ").append(w.pid()).append("): ")
                    .append(w.outputTail()));
                throw new CommTimeoutException("starting " + workers.size() + " worker processes " + deadline.timedOutAfter() + ": "
                    + connected + " connected; their output so far:" + output);
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommException("interrupted while starting the worker processes");
            }
        }
    }

    /** Reads the HELLO of a new connection (within the deadline) and gives the channel to its worker. */
    private static void attach(ControlChannel channel, Map<Long, WorkerProcess> workers, Deadline deadline) {
        ControlChannel.Frame hello = firstFrame(channel, deadline, "a worker connected but");
        attachHello(channel, hello, workers);
    }

    /**
     * Gives {@code channel} to the worker its {@code HELLO} names, if that worker expects it (same pid, not attached yet;
     * a worker on another node may say hello before its node agent reported its pid).
     *
     * @return the worker
     * @throws CommException naming what the worker said, and the channel is closed, otherwise
     */
    static WorkerProcess attachHello(ControlChannel channel, ControlChannel.Frame hello, Map<Long, WorkerProcess> workers) {
        WireReader in = hello.reader();
        int version = in.getInt("protocol version");
        long device = in.getLong("device");
        long pid = in.getLong("pid");
        in.expectEnd("HELLO");
        WorkerProcess worker = workers.get(device);
        if (worker != null && worker.life() instanceof RemoteWorkerLife remote && remote.pid() < 0) {
            remote.started(pid);
        }
        if (hello.type() != ControlChannel.HELLO || version != PROTOCOL_VERSION || worker == null || worker.pid() != pid
            || worker.isAttached()) {
            channel.close();
            throw new CommException("a worker introduced itself as device " + device + ", pid " + pid + ", protocol " + version
                + "; expected one of " + workers.keySet() + " with protocol " + PROTOCOL_VERSION);
        }
        channel.setPeer("the worker of " + worker.device());
        worker.attach(channel);
        return worker;
    }

    /**
     * The first frame of a new connection, read within {@code deadline}; the channel is closed if none comes.
     * {@code who} starts the error's message ("a worker connected but").
     */
    static ControlChannel.Frame firstFrame(ControlChannel channel, Deadline deadline, String who) {
        try (var reader = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()) {
            var frame = reader.submit(channel::receive);
            try {
                return frame.get(Math.max(1, deadline.remainingNanos()), java.util.concurrent.TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                channel.close();
                throw new CommTimeoutException(who + " sent nothing " + deadline.timedOutAfter());
            } catch (java.util.concurrent.ExecutionException e) {
                channel.close();
                throw new CommException(who + " its first frame could not be read: " + e.getCause(), e.getCause());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                channel.close();
                throw new CommException(who + " was interrupted while reading its first frame");
            }
        }
    }
}
