package org.dtorch.core.runtime.process;

import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.promise.RemoteFailureException;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousClient;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.DeviceLoop;
import org.dtorch.core.runtime.FailureRegistry;
import org.dtorch.core.runtime.MemoryWatch;
import org.dtorch.core.runtime.RuntimeOptions;
import org.dtorch.core.trace.Trace;
import org.dtorch.core.trace.TracePart;
import org.dtorch.core.trace.Tracer;






/**
 * The main class of a worker process (per-device-process mode, and every device of a run across nodes): one device,
 * driven by the controller over a Unix-domain socket, or over an authenticated TCP connection from another node. A
 * reader thread decodes what the controller sends; the main thread runs the operators in order with the same
 * {@link DeviceLoop} and kernels as thread mode, and reports which ran ({@code DONE}, in batches, with the number of
 * tensors it holds) and which promise errors occurred ({@code FAILED}).
 *
 * <p>Only a writer thread of its own writes to the socket: the main thread is interrupted to cancel waits,
 * and an interrupted thread that touches a socket channel closes it.
 *
 * <p>A malformed, truncated or corrupted message is never executed: the worker reports it ({@code FATAL})
 * and exits with status {@value #EXIT_PROTOCOL}. When the controller goes away (its socket closes), the
 * worker cancels what is queued and exits.
 *
 * <p>Arguments: {@code --socket PATH} or {@code --connect HOST:PORT} (the token in {@value ClusterToken#ENV}, and
 * {@code --rendezvous HOST:PORT}, the run's, where groups across nodes meet),
 * {@code --device N --devices N --instance ID --failures NAME --timeout-ms MS
 * --same-device BOOL}, and optionally {@code --device-kind cpu|cuda} (default {@code cpu}),
 * {@code --physical-device N} (default: the {@code --device} index), the device the kernels run on
 * ({@link RuntimeOptions#physicalDevice}), and {@code --memory-growth-syncs N --memory-growth-floor BYTES}
 * ({@link MemoryWatch}, default {@link MemoryWatch#DEFAULTS}); with {@code --trace-from-start true} it records a trace
 * from its start, and with {@code --trace-part FILE} it writes what it still records at its end there
 * ({@link TracePart}). With {@code --standby SOCKET --standby-timeout-ms MS} it starts as a standby worker that
 * receives these arguments later ({@link WorkerStandby}). {@code TRACE_START} and {@code TRACE_STOP} frames open and close a recording in order with the
 * operators, and the trace goes back as {@code TRACE_EVENTS} frames. A CUDA worker makes its physical device current
 * before anything else touches CUDA, and sees the host's GPUs numbered as its controller does (it inherits the environment).
 *
 * <p>Not thread-safe: a process entry point.
 */
public final class WorkerMain {
    /** Exit status after a message that was not valid. */
    public static final int EXIT_PROTOCOL = 3;
    /** Exit status when the worker could not start. */
    public static final int EXIT_STARTUP = 2;
    private static final int DONE_BATCH = 256;
    private static final long REPORT_DELAY_NANOS = 200_000;
    private static final long ORPHAN_GRACE_MILLIS = 5_000;
    /** The longest a worker on another node waits for the controller's side of the handshake. */
    private static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(30);

    private final Device device;
    private final ControlChannel channel;
    private final DeviceLoop loop;
    private final FailureRegistry failures;
    private final ThreadGroupManager groups;
    private final List<Long> done = new ArrayList<>();
    private int reportedBlobs = -1;
    private final Object writeSignal = new Object();
    /** {@code TRACE_STOP}s received and not yet run: a {@code TRACE_START} then waits for them in the loop. */
    private final AtomicInteger traceStops = new AtomicInteger();
    /** Guarded by {@link #writeSignal}. */
    private boolean writePending;
    /** Guarded by {@link #writeSignal}. */
    private boolean writerStopping;

    private WorkerMain(Devices devices, ControlChannel channel, FailureRegistry failures, ThreadGroupManager groups, Duration timeout,
                       MemoryWatch watch) {
        this.device = devices.logical();
        this.channel = channel;
        this.failures = failures;
        this.groups = groups;
        this.loop = new DeviceLoop(devices.logical(), devices.physical(), failures, groups, timeout, watch);
    }

    /**
     * The worker's logical device (the rank's name in the runtime) and the physical device its kernels run on.
     *
     * @param logical  the runtime's device id and kind
     * @param physical where the memory and the stream are: the logical device itself, or {@code cuda:0} for every rank
     *                 of a same-device CUDA runtime
     */
    record Devices(Device logical, Device physical) {

        /** From the parsed arguments; the kind defaults to CPU and the physical index to the logical one. */
        static Devices of(Map<String, String> options) {
            String kindName = options.getOrDefault("device-kind", DeviceKind.CPU.shortName());
            DeviceKind kind = null;
            for (DeviceKind k : DeviceKind.values()) {
                if (k.shortName().equals(kindName)) {
                    kind = k;
                }
            }
            if (kind == null) {
                throw new IllegalArgumentException("--device-kind must be cpu or cuda, got '" + kindName + "'");
            }
            int index = Integer.parseInt(options.get("device"));
            int physicalIndex = Integer.parseInt(options.getOrDefault("physical-device", String.valueOf(index)));
            if (index < 0 || physicalIndex < 0) {
                throw new IllegalArgumentException("--device and --physical-device must be >= 0, got " + index + " and " + physicalIndex);
            }
            if (kind == DeviceKind.CPU && physicalIndex != index) {
                throw new IllegalArgumentException("a CPU worker runs on its own device: --physical-device " + physicalIndex
                    + " differs from --device " + index);
            }
            return new Devices(new Device(kind, index), new Device(kind, physicalIndex));
        }
    }

    public static void main(String[] args) {
        // A standby worker (StandbyWorkers) waits here, natives loaded, until a run assigns it the arguments below.
        Map<String, String> options = parse(WorkerStandby.isStandby(args) ? WorkerStandby.awaitAssignment(args) : args);
        String tracePart = options.get("trace-part");
        if (Boolean.parseBoolean(options.get("trace-from-start"))) {
            Tracer.start(); // the controller records: so does this worker, until it exits or a TRACE_STOP
        }
        WorkerMain worker;
        Cuda.loadNatives(); // before the first tensor of this JVM: libtorch decides once whether it has CUDA
        try {
            Devices devices = Devices.of(options);
            Device device = devices.logical();
            // Before any stream, event or allocation: CUDA work this thread issues by default then goes to the worker's
            // GPU (a CPU device needs nothing; a GPU this process cannot use fails the start with the reason).
            Cuda.setCurrentDevice(devices.physical());
            limitIntraOpThreads(Integer.parseInt(options.get("devices")));
            Duration timeout = Duration.ofMillis(Long.parseLong(options.get("timeout-ms")));
            ControlChannel channel = new ControlChannel(connect(options, timeout), "the controller");
            watchParent("worker of " + device);
            channel.send(ControlChannel.HELLO, new WireWriter().putInt(WorkerPool.PROTOCOL_VERSION).putLong(device.index())
                .putLong(ProcessHandle.current().pid()).toByteArray());
            String rendezvous = options.get("rendezvous");
            ThreadGroupManager groups = new ThreadGroupManager(Boolean.parseBoolean(options.get("same-device")), options.get("instance"),
                timeout, ThreadGroupManager.Role.WORKER, rendezvous == null ? null : RendezvousAddress.parse(rendezvous));
            SharedFailureBoard board = SharedFailureBoard.open(options.get("failures"));
            FailureRegistry failures = rendezvous == null ? board : new NodeFailureBoard(board, RendezvousClient.connect(
                RendezvousAddress.parse(rendezvous), Deadline.after(timeout), "the worker of " + device), options.get("instance"));
            worker = new WorkerMain(devices, channel, failures, groups, timeout, memoryWatch(options));
        } catch (Throwable e) {
            System.err.println("worker could not start: " + e);
            e.printStackTrace();
            System.exit(EXIT_STARTUP);
            return;
        }
        int status = worker.run();
        writeTracePart(tracePart);
        System.exit(status);
    }

    /**
     * The control connection: the Unix-domain socket at {@code --socket} (one host), or, across nodes, a TCP connection
     * to {@code --connect host:port} authenticated with the run's token, which the environment variable
     * {@value ClusterToken#ENV} carries (never the command line).
     */
    private static SocketChannel connect(Map<String, String> options, Duration timeout) throws IOException {
        String controller = options.get("connect");
        if (controller == null) {
            SocketChannel socket = SocketChannel.open(StandardProtocolFamily.UNIX);
            socket.connect(UnixDomainSocketAddress.of(Path.of(options.get("socket"))));
            return socket;
        }
        String token = System.getenv(ClusterToken.ENV);
        if (token == null) {
            throw new IllegalArgumentException("--connect " + controller + " needs the run's token in the environment variable " + ClusterToken.ENV);
        }
        RendezvousAddress address = RendezvousAddress.parse(controller);
        Duration handshake = timeout.compareTo(HANDSHAKE_TIMEOUT) < 0 ? timeout : HANDSHAKE_TIMEOUT;
        return ControlHandshake.connect(new InetSocketAddress(address.host(), address.port()), ClusterToken.of(token, ClusterToken.ENV),
            handshake).getChannel();
    }

    /**
     * Exits when the process that started this worker does (the controller, or the node agent of a run across nodes,
     * killed with SIGKILL): a worker never outlives who supervises it.
     */
    static void watchParent(String who) {
        ProcessHandle.current().parent().ifPresent(parent -> parent.onExit().thenRun(() -> {
            System.err.println(who + ": the process that started it (pid " + parent.pid() + ") exited; exiting");
            Runtime.getRuntime().halt(EXIT_PROTOCOL);
        }));
    }

    /**
     * Writes this worker's trace to {@code part}, which the controller merges once the worker exited; nothing when
     * there is no part (null) or nothing records (a {@code TRACE_STOP} took the trace).
     */
    private static void writeTracePart(String part) {
        if (part != null && Tracer.enabled()) {
            try {
                TracePart.write(Tracer.stop(), Path.of(part));
            } catch (IOException | RuntimeException e) {
                System.err.println("worker could not write its trace to " + part + ": " + e);
            }
        }
    }

    /** System property: libtorch's intra-op threads per worker; default the CPUs divided among the devices. */
    public static final String THREADS_PROPERTY = "dtorch.worker.intraOpThreads";

    /**
     * Gives this worker its share of the CPUs for libtorch's intra-op parallelism (OpenMP), unless
     * {@code OMP_NUM_THREADS} or {@value #THREADS_PROPERTY} says otherwise. Each worker is a process of its own:
     * left at libtorch's default, every worker's pool takes every CPU, and pools whose threads spin while waiting
     * take the CPUs from each other (a 1 MiB {@code ones} cost 3 ms instead of 0.2 ms with two workers on 2 CPUs).
     */
    private static void limitIntraOpThreads(int devices) {
        Integer configured = Integer.getInteger(THREADS_PROPERTY);
        if (configured == null && System.getenv("OMP_NUM_THREADS") != null) {
            return;
        }
        int threads = configured != null ? configured : Math.max(1, Runtime.getRuntime().availableProcessors() / Math.max(1, devices));
        if (threads < 1) {
            throw new IllegalArgumentException(THREADS_PROPERTY + " must be at least 1, got " + threads);
        }
        org.bytedeco.pytorch.global.torch.set_num_threads(threads);
    }

    /** The {@code --memory-growth-syncs} and {@code --memory-growth-floor} arguments; {@link MemoryWatch#DEFAULTS} where absent. */
    static MemoryWatch memoryWatch(Map<String, String> options) {
        return new MemoryWatch(Integer.parseInt(options.getOrDefault("memory-growth-syncs", String.valueOf(MemoryWatch.DEFAULT_GROWTH_SYNCS))),
            Long.parseLong(options.getOrDefault("memory-growth-floor", String.valueOf(MemoryWatch.DEFAULT_FLOOR_BYTES))));
    }

    /** The {@code --name value} pairs of a worker's command line, the required ones checked present. */
    static Map<String, String> parse(String[] args) {
        Map<String, String> options = parse(args, List.of("device", "devices", "instance", "failures", "timeout-ms", "same-device"));
        if (options.containsKey("socket") == options.containsKey("connect")) {
            throw new IllegalArgumentException("expected one of --socket PATH and --connect HOST:PORT");
        }
        return options;
    }

    /** The {@code --name value} pairs of {@code args}, each of {@code required} checked present. */
    static Map<String, String> parse(String[] args, List<String> required) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 == args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got '" + args[i] + "'");
            }
            options.put(args[i].substring(2), args[i + 1]);
        }
        for (String name : required) {
            if (!options.containsKey(name)) {
                throw new IllegalArgumentException("missing --" + name);
            }
        }
        return options;
    }

    /** Runs until SHUTDOWN (or the controller is gone); the exit status. */
    private int run() {
        Thread.ofPlatform().daemon().name("dtorch-control-reader").start(this::readControl);
        Thread writer = Thread.ofPlatform().daemon().name("dtorch-control-writer").start(this::writeControl);
        try {
            RuntimeException fatal = loop.run(new DeviceLoop.Listener() {
                @Override
                public void ran(Operator op) {
                    done.add(op.id());
                    if (done.size() >= DONE_BATCH) {
                        report();
                    }
                }

                /**
                 * Reports are for bookkeeping (futures are set through shared memory): while operators keep coming,
                 * batch them; report once the queue stayed empty for a moment.
                 */
                @Override
                public long lingerNanos() {
                    return done.isEmpty() ? 0 : REPORT_DELAY_NANOS;
                }

                @Override
                public void caughtUp() {
                    report();
                }
            });
            if (fatal != null) {
                sendFatal("rejected a control message: " + fatal.getMessage());
                return EXIT_PROTOCOL;
            }
            return 0;
        } finally {
            try {
                report();
            } catch (RuntimeException ignored) {
                // the controller may be gone
            }
            groups.close();
            failures.close();
            synchronized (writeSignal) {
                writerStopping = true;
                writeSignal.notifyAll();
            }
            try {
                writer.join(10_000);
            } catch (InterruptedException ignored) {
                // closing anyway
            }
            channel.closeGracefully(Duration.ofSeconds(2));
        }
    }

    /** Sends the operators run since the last report, and the number of tensors held, if anything changed. */
    private void report() {
        int blobs = loop.liveBlobs();
        if (done.isEmpty() && blobs == reportedBlobs) {
            if (channel.hasQueued()) {
                flushQuietly(); // FAILED reports
            }
            return;
        }
        WireWriter out = new WireWriter().putInt(done.size());
        done.forEach(out::putLong);
        out.putInt(blobs);
        done.clear();
        reportedBlobs = blobs;
        channel.queue(ControlChannel.DONE, out.toByteArray());
        flushQuietly();
    }

    /** Asks the writer thread to write what is queued. */
    private void flushQuietly() {
        synchronized (writeSignal) {
            writePending = true;
            writeSignal.notifyAll();
        }
    }

    private void writeControl() {
        while (true) {
            synchronized (writeSignal) {
                while (!writePending && !writerStopping) {
                    try {
                        writeSignal.wait();
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                if (!writePending && writerStopping) {
                    return;
                }
                writePending = false;
            }
            try {
                channel.flush();
            } catch (IOException e) {
                loop.cancel(new CommException(FailureKind.CANCELLED, "the controller is gone: " + e, null));
                return;
            }
        }
    }

    /**
     * A promise of operator {@code operatorId} failed: the controller decides what its future reports, on the kind
     * recorded where the failure happened.
     */
    private void reportFailure(long operatorId, Throwable cause) {
        channel.queue(ControlChannel.FAILED, new WireWriter().putLong(operatorId).putInt(FailureKind.of(cause).ordinal())
            .putString(RemoteFailureException.describe(cause)).toByteArray());
    }

    /** Starts recording, unless this worker records already (it started inside the controller's session). */
    private static void startTracing() {
        if (!Tracer.enabled()) {
            Tracer.start();
        }
    }

    /**
     * Stops recording (on the loop's thread, after every operator that came before the {@code TRACE_STOP}) and sends
     * the trace as {@code TRACE_EVENTS} frames; an empty trace when nothing recorded.
     */
    private void sendTrace() {
        byte[] part = TracePart.encode(Tracer.enabled() ? Tracer.stop() : Trace.EMPTY);
        traceStops.decrementAndGet();
        int piece = ControlChannel.MAX_PAYLOAD - 1;
        for (int from = 0; ; from += piece) {
            int to = Math.min(part.length, from + piece);
            byte[] payload = new byte[1 + to - from];
            payload[0] = (byte) (to == part.length ? 1 : 0);
            System.arraycopy(part, from, payload, 1, to - from);
            channel.queue(ControlChannel.TRACE_EVENTS, payload);
            if (to == part.length) {
                break;
            }
        }
        flushQuietly();
    }

    private void sendFatal(String text) {
        channel.queue(ControlChannel.FATAL, new WireWriter().putString(text).toByteArray());
        flushQuietly();
        System.err.println("worker of " + device + ": " + text);
    }

    private void readControl() {
        Tracer.nameThisThread(device.index() + 1, "device " + device); // its frames in the device's row, beside its loop
        try {
            while (true) {
                ControlChannel.Frame frame = channel.receive();
                WireReader in = frame.reader();
                switch (frame.type()) {
                    case ControlChannel.OPERATOR -> loop.submit(OperatorCodec.decode(in, this::reportFailure));
                    case ControlChannel.RELEASE -> {
                        long id = in.getLong("released operand id");
                        in.expectEnd("RELEASE");
                        loop.submitRelease(id);
                    }
                    case ControlChannel.CANCEL -> {
                        String why = in.getString("cancel reason");
                        in.expectEnd("CANCEL");
                        loop.cancel(new CommException(FailureKind.CANCELLED, "cancelled by the controller: " + why, null));
                        // Peers blocked in a collective this device will skip fail once its idle groups are gone.
                        groups.abort("cancelled by the controller: " + why);
                    }
                    case ControlChannel.TRACE_START -> {
                        in.expectEnd("TRACE_START");
                        if (traceStops.get() > 0) {
                            loop.submitTask(WorkerMain::startTracing); // after the stop still queued
                        } else {
                            startTracing(); // now: the frames that follow are recorded as they arrive
                        }
                    }
                    case ControlChannel.TRACE_STOP -> {
                        in.expectEnd("TRACE_STOP");
                        traceStops.incrementAndGet();
                        loop.submitTask(this::sendTrace);
                    }
                    case ControlChannel.SHUTDOWN -> {
                        in.expectEnd("SHUTDOWN");
                        loop.stop();
                        return;
                    }
                    default -> throw new ProtocolException("the controller sent a frame of type " + frame.type()
                        + ", which only workers send");
                }
            }
        } catch (ProtocolException bad) {
            loop.stopWith(bad);
        } catch (EOFException | java.nio.channels.ClosedChannelException gone) {
            orphaned("the controller closed the control channel");
        } catch (IOException | RuntimeException e) {
            orphaned("the control channel broke: " + e);
        }
    }

    /** The controller is gone: cancel, stop, and make sure the process ends even if a kernel hangs. */
    private void orphaned(String why) {
        loop.cancel(new CommException(FailureKind.CANCELLED, why, null));
        groups.abort(why);
        loop.stop();
        Thread.ofPlatform().daemon().start(() -> {
            try {
                Thread.sleep(ORPHAN_GRACE_MILLIS);
            } catch (InterruptedException ignored) {
                // exit now
            }
            System.err.println("worker of " + device + ": " + why + "; exiting");
            Runtime.getRuntime().halt(EXIT_PROTOCOL);
        });
    }
}
