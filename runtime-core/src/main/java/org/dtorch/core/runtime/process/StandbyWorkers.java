package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.io.InputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.shm.OwnedPaths;
import org.dtorch.core.shm.SharedRegion;

/**
 * Worker JVMs started ahead of this process's next per-device-process runtime, for a process that runs one runtime
 * after another (the warm runtime server of {@code ./dtorch run}). A standby worker ({@link WorkerStandby}) has started
 * its JVM and loaded libtorch's natives, and waits on a Unix-domain socket of this reserve for its run. When a runtime
 * starts its workers ({@link WorkerPool}), it adopts a prepared set made for its own configuration (number of devices,
 * device kind, and the worker JVM's whole command line: JDK, JVM options, inherited properties, class path) by sending
 * each worker its run's arguments ({@code ASSIGN}); for another configuration, or without a ready set, it launches fresh
 * workers as it would without the reserve. Adopted workers belong to their runtime and end with it: a worker serves
 * one run only. {@link #replenish} prepares the next set, in the background, for the configuration the last runtime
 * asked for; nothing is prepared before a runtime has asked.
 *
 * <p>Unused standby workers end with the reserve ({@link #close}), with the process that started them (each watches its
 * parent, and its connection to the reserve closes), or when their standby time ({@code standbyLimit}) is over.
 *
 * <p>A process installs its reserve with {@link #install}; runtimes of a process without one launch their workers as
 * before.
 *
 * <p>Thread-safe: preparation runs on a thread of its own; runtimes and the owner call the rest from any thread.
 */
public final class StandbyWorkers implements AutoCloseable {
    private static volatile StandbyWorkers installed;

    private final Path socket;
    private final ServerSocketChannel server;
    private final Duration standbyLimit;
    private final Consumer<String> log;
    private final ExecutorService preparer = Executors.newSingleThreadExecutor(r -> Thread.ofPlatform().daemon()
        .name("dtorch-standby-workers").unstarted(r));
    private final Object lock = new Object();
    /** What the last runtime asked for; guarded by {@link #lock}. */
    private Configuration wanted;
    /** The set being prepared or ready (null: none, or its preparation failed); guarded by {@link #lock}. */
    private CompletableFuture<StandbySet> next;
    /** What {@link #next} is prepared for; guarded by {@link #lock}. */
    private Configuration nextConfiguration;
    private volatile boolean closed;

    private StandbyWorkers(Path socket, ServerSocketChannel server, Duration standbyLimit, Consumer<String> log) {
        this.socket = socket;
        this.server = server;
        this.standbyLimit = standbyLimit;
        this.log = log;
    }

    /**
     * A reserve with its socket in a private directory of the shared-memory directory, named after this process so that
     * the janitor removes what a killed process left.
     *
     * @param standbyLimit how long a standby worker waits for a run before it exits
     * @param log          receives one line per event (prepared, adopted, discarded)
     */
    public static StandbyWorkers open(Duration standbyLimit, Consumer<String> log) {
        if (standbyLimit.isNegative() || standbyLimit.isZero()) {
            throw new IllegalArgumentException("a standby worker's wait must be positive, got " + standbyLimit);
        }
        Path socket = SharedRegion.checkedDirectory().resolve(SharedRegion.PREFIX + GlobalCommInstanceId.next() + "-standby").resolve("sock");
        OwnedPaths.createPrivateDirectory(socket.getParent(), "standby workers' socket directory");
        try {
            ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            server.bind(UnixDomainSocketAddress.of(socket));
            server.configureBlocking(false);
            return new StandbyWorkers(socket, server, standbyLimit, log);
        } catch (IOException e) {
            removeSocket(socket);
            throw new CommException("cannot open the standby workers' socket " + socket + ": " + e, e);
        }
    }

    /** Makes {@code reserve} the one this process's runtimes adopt workers from; null removes it. */
    public static void install(StandbyWorkers reserve) {
        installed = reserve;
    }

    /** The reserve this process's runtimes adopt workers from, or null. */
    static StandbyWorkers installed() {
        return installed;
    }

    /**
     * Starts preparing a set for the configuration the last runtime asked for, in the background; nothing if no runtime
     * asked yet, or a set is ready or being prepared. Returns at once.
     */
    public void replenish() {
        synchronized (lock) {
            if (closed || wanted == null || next != null) {
                return;
            }
            Configuration config = wanted;
            log.accept("preparing " + config.describe() + " on standby");
            nextConfiguration = config;
            next = CompletableFuture.supplyAsync(() -> prepare(config), preparer);
        }
    }

    /**
     * The standby workers for {@code config}, one per device, or null: then the caller launches its own. Waits for a set
     * being prepared for {@code config} until {@code deadline}; a set prepared for another configuration is discarded.
     * Either way {@code config} is what {@link #replenish} prepares next.
     */
    List<Standby> take(Configuration config, Deadline deadline) {
        CompletableFuture<StandbySet> pending;
        Configuration preparedFor;
        synchronized (lock) {
            wanted = config;
            pending = next;
            preparedFor = nextConfiguration;
            next = null;
            nextConfiguration = null;
        }
        if (pending == null) {
            log.accept("no standby workers prepared; the runtime starts " + config.describe());
            return null;
        }
        if (!preparedFor.sameAs(config)) {
            discard(pending);
            log.accept("the standby workers are " + preparedFor.describe() + "; the runtime wants " + config.describe()
                + ", so it starts its own and the standby ones end");
            return null;
        }
        StandbySet set;
        try {
            set = pending.get(Math.max(1, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            discard(pending);
            log.accept("the standby workers were not ready " + deadline.timedOutAfter() + "; the runtime starts its own");
            return null;
        } catch (ExecutionException e) {
            return null; // prepare() logged why
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            discard(pending);
            throw new CommException("interrupted while waiting for the standby workers");
        }
        if (set == null) {
            return null;
        }
        for (Standby worker : set.workers()) {
            if (!worker.process().isAlive()) {
                set.destroy();
                log.accept("standby worker " + worker.process().pid() + " exited with status " + worker.process().exitValue()
                    + " while waiting: " + outputOf(worker.process()) + "; the runtime starts its own");
                return null;
            }
        }
        log.accept("a runtime adopts " + set.workers().size() + " standby workers, pids " + set.pids());
        return set.workers();
    }

    /** Logs a standby worker that could not take its assignment; the caller kills it and starts that device's worker. */
    void assignmentFailed(Standby worker, Device device, Exception why) {
        log.accept("standby worker " + worker.process().pid() + " could not take its run (" + why + "); the runtime starts "
            + device + "'s worker itself");
    }

    /** Ends every standby worker, closes the socket and removes its directory; idempotent. */
    @Override
    public void close() {
        CompletableFuture<StandbySet> pending;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            pending = next;
            next = null;
        }
        if (installed == this) {
            installed = null;
        }
        if (pending != null) {
            discard(pending);
        }
        preparer.shutdown();
        try {
            server.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        removeSocket(socket);
    }

    /** Ends the set {@code pending} brings once it is there (at once if it is); a failed preparation brings none. */
    private static void discard(CompletableFuture<StandbySet> pending) {
        pending.thenAccept(set -> {
            if (set != null) {
                set.destroy();
            }
        });
    }

    private static void removeSocket(Path socket) {
        try {
            Files.deleteIfExists(socket);
            Files.deleteIfExists(socket.getParent());
        } catch (IOException ignored) {
            // the janitor removes it once this process is gone
        }
    }

    /** Launches a set for {@code config} and waits for each worker's {@code STANDBY}; null (logged) if that fails. */
    private StandbySet prepare(Configuration config) {
        long start = System.nanoTime();
        List<Process> processes = new ArrayList<>();
        List<Standby> ready = new ArrayList<>();
        try {
            JvmCommand command = config.command().plus(List.of("--standby", socket.toString(), "--standby-timeout-ms",
                String.valueOf(standbyLimit.toMillis())));
            for (int i = 0; i < config.count(); i++) {
                processes.add(command.processBuilder().redirectErrorStream(true).start());
            }
            Deadline deadline = Deadline.after(Duration.ofSeconds(Long.getLong(WorkerPool.STARTUP_PROPERTY, WorkerPool.DEFAULT_STARTUP_SECONDS)));
            while (ready.size() < processes.size()) {
                SocketChannel accepted = server.accept();
                if (accepted != null) {
                    accepted.configureBlocking(true);
                    Standby worker = introduce(new ControlChannel(accepted, "a standby worker"), processes, ready, deadline);
                    if (worker != null) {
                        ready.add(worker);
                    }
                    continue;
                }
                for (Process p : processes) {
                    if (!p.isAlive()) {
                        throw new CommException("standby worker " + p.pid() + " exited with status " + p.exitValue() + " while starting: "
                            + outputOf(p));
                    }
                }
                if (deadline.expired()) {
                    throw new CommTimeoutException("starting " + processes.size() + " standby workers " + deadline.timedOutAfter() + ": "
                        + ready.size() + " reported on " + socket);
                }
                if (closed) {
                    throw new CommException("the reserve closed while its standby workers started");
                }
                Thread.sleep(5);
            }
            StandbySet set = new StandbySet(config, ready);
            log.accept("prepared " + ready.size() + " standby workers, pids " + set.pids() + ", in "
                + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms");
            if (closed) {
                set.destroy();
                return null;
            }
            return set;
        } catch (IOException | RuntimeException | InterruptedException e) {
            ready.forEach(w -> w.channel().close());
            processes.forEach(Process::destroyForcibly);
            log.accept("could not prepare " + config.describe() + ": " + e.getMessage());
            return null;
        }
    }

    /**
     * Reads the {@code STANDBY} of a new connection and pairs it with the process of that pid; null (the connection
     * closed) for a process that is not one of {@code processes} or is paired already.
     */
    private Standby introduce(ControlChannel channel, List<Process> processes, List<Standby> ready, Deadline deadline) {
        ControlChannel.Frame frame = WorkerPool.firstFrame(channel, deadline, "a standby worker connected but");
        WireReader in = frame.reader();
        int version = in.getInt("protocol version");
        long pid = in.getLong("pid");
        in.expectEnd("STANDBY");
        for (Process p : processes) {
            if (p.pid() == pid && frame.type() == ControlChannel.STANDBY && version == WorkerPool.PROTOCOL_VERSION
                && ready.stream().noneMatch(w -> w.process() == p)) {
                channel.setPeer("standby worker " + pid);
                return new Standby(p, channel);
            }
        }
        channel.close();
        log.accept("ignored a connection that introduced itself as standby worker " + pid + " with protocol " + version);
        return null;
    }

    /** The last lines a standby worker that exited printed. */
    private static String outputOf(Process process) {
        try (InputStream in = process.getInputStream()) {
            String all = new String(in.readNBytes(64 * 1024), StandardCharsets.UTF_8).strip();
            List<String> lines = all.lines().toList();
            return lines.isEmpty() ? "no output" : String.join("\n", lines.subList(Math.max(0, lines.size() - LocalWorkerLife.OUTPUT_TAIL),
                lines.size()));
        } catch (IOException e) {
            return "its output is unreadable: " + e;
        }
    }

    /**
     * What a set of standby workers is made for: a runtime with another configuration does not adopt them.
     * Thread-safe: immutable.
     *
     * @param count   the number of workers, one per device
     * @param kind    the device kind
     * @param command the worker JVM's command line without arguments (the JDK, its options, the inherited properties and
     *                the class path)
     */
    record Configuration(int count, DeviceKind kind, JvmCommand command) {

        /** Whether a worker made for this configuration is one a runtime of {@code other} would launch. */
        boolean sameAs(Configuration other) {
            return count == other.count && kind == other.kind
                && command.command().stream().sorted().toList().equals(other.command.command().stream().sorted().toList());
        }

        String describe() {
            return count + " " + kind.shortName() + " workers";
        }
    }

    /**
     * A standby worker: its process (a child of this JVM, its output not read yet) and its connection to the reserve.
     * Thread-safe: the runtime that took it is its only user.
     */
    record Standby(Process process, ControlChannel channel) {

        /** Sends the worker its run and lets it go; it connects to its run's control socket next. */
        void assign(WorkerStandby.Assignment assignment) throws IOException {
            try {
                channel.send(ControlChannel.ASSIGN, assignment.encode());
            } finally {
                channel.close();
            }
        }
    }

    /** A prepared set. Thread-safe: immutable but for {@link #destroy}, which is idempotent. */
    private record StandbySet(Configuration config, List<Standby> workers) {

        List<Long> pids() {
            return workers.stream().map(w -> w.process().pid()).toList();
        }

        void destroy() {
            for (Standby w : workers) {
                w.channel().close();
                w.process().destroyForcibly();
            }
        }
    }
}
