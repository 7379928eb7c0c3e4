package org.dtorch.python;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import jdk.net.ExtendedSocketOptions;
import jdk.net.UnixDomainPrincipal;
import org.dtorch.core.runtime.process.StandbyWorkers;
import org.dtorch.core.shm.OwnedPaths;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;

/**
 * The warm runtime server of {@code ./dtorch run}: one JVM per user and build that keeps what every start pays for
 * (the JVM's loaded and compiled classes, libtorch's natives, GraalPy's languages) and runs scripts sent by
 * {@link RunClient} over a Unix-domain socket in the user's private runtime directory. Each run gets a fresh runtime and
 * a fresh GraalPy context with its own engine, made before the run arrives ({@link PreparedPython}); both are closed
 * when the run ends, so no state of one script reaches the next. Likewise a {@code --per-device-process} run adopts
 * worker JVMs started before it arrived ({@link StandbyWorkers}, for the configuration of the last such run), which end
 * with its runtime. The launcher's own code ({@link Launcher#run}) runs each command line, so output and exit codes are
 * those of a direct start.
 *
 * <p>One run at a time: a client that finds the server busy starts its run directly. Only the user who owns the
 * socket's directory may connect (the directory is 0700, and the peer's credentials are checked too). Signals the
 * client forwards stop the run, not the server; a run that does not stop within {@value #STOP_GRACE_SECONDS} s ends
 * the server. The server ends after {@value #IDLE_ENV} seconds without a run (default {@value #DEFAULT_IDLE_SECONDS}),
 * or when its build changes.
 *
 * <p>{@code RunServer SOCKET}. Thread-safe: the accepting thread, one run's threads, the preparing thread and the
 * watchdog share the state through atomics and volatile fields.
 */
final class RunServer {
    /** Environment variable: seconds without a run after which the server ends. */
    static final String IDLE_ENV = "DTORCH_SERVER_IDLE_SECONDS";
    static final long DEFAULT_IDLE_SECONDS = 1800;
    /** How long a run waits for its prepared context (a new server prepares its first while the JVM is cold). */
    static final long PREPARE_SECONDS = RunClient.READY_SECONDS - 10;
    /** How long a client has to send its request once connected. */
    static final long REQUEST_SECONDS = 10;
    /** How long a stopped run may take to end before the server ends instead. */
    static final long STOP_GRACE_SECONDS = RunClient.SIGNAL_GRACE_SECONDS - 2;
    private static final long WATCH_MILLIS = 1000;
    /** How much longer than the idle time an unused standby worker waits for a run. */
    private static final long STANDBY_MARGIN_SECONDS = 60;

    private final Path socket;
    private final long idleNanos;
    private final BuildStamp build;
    private final AtomicBoolean busy = new AtomicBoolean();
    private final OutputStream routedOut;
    private final OutputStream routedErr;
    private final PrintStream serverLog;
    private volatile long lastRunEnd = System.nanoTime();
    /** Worker JVMs started ahead of the next {@code --per-device-process} run; null if the server has none. */
    private final StandbyWorkers workers;
    /** The context the next run gets: being prepared, ready, or null when a run took it. */
    private volatile CompletableFuture<PreparedPython> next;

    private RunServer(Path socket, long idleSeconds, OutputStream routedOut, OutputStream routedErr, PrintStream serverLog,
                      StandbyWorkers workers) {
        this.serverLog = serverLog;
        this.workers = workers;
        this.socket = socket;
        this.idleNanos = TimeUnit.SECONDS.toNanos(idleSeconds);
        this.build = BuildStamp.ofThisProcess();
        this.routedOut = routedOut;
        this.routedErr = routedErr;
    }

    public static void main(String[] args) throws IOException {
        Path socket = Path.of(args[0]).toAbsolutePath();
        PrintStream log = System.err;
        // First, before any logger captures System.err: a run's output goes to its client.
        OutputStream out = ServerStreams.routed(ServerWire.STDOUT, System.out);
        OutputStream err = ServerStreams.routed(ServerWire.STDERR, System.err);
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        Path dir = OwnedPaths.ensurePrivateDirectory(socket.getParent(), "runtime server directory",
            "run with --no-server or DTORCH_SERVER=off");
        try (FileChannel lockFile = FileChannel.open(Path.of(socket + ".lock"), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
             FileLock lock = lockFile.tryLock()) {
            if (lock == null) {
                log.println(Instant.now() + " another server holds " + socket + ".lock; this one ends");
                return;
            }
            Files.deleteIfExists(socket); // a socket left by a server that is gone: the lock says none serves it
            pruneOldFiles(dir, log);
            try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
                server.bind(UnixDomainSocketAddress.of(socket));
                Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
                log.println(Instant.now() + " dtorch runtime server " + ProcessHandle.current().pid() + " serves " + socket);
                long idle = idleSeconds(System.getenv(IDLE_ENV));
                try (StandbyWorkers workers = openStandbyWorkers(idle, log)) {
                    new RunServer(socket, idle, out, err, log, workers).serve(server, Files.getOwner(dir), log);
                }
            }
        }
    }

    /**
     * The reserve of worker JVMs for {@code --per-device-process} runs, installed for this JVM's runtimes; null (logged)
     * if its socket cannot be made: runs then start their workers as a direct start does.
     */
    private static StandbyWorkers openStandbyWorkers(long idleSeconds, PrintStream log) {
        try {
            // Unused standby workers outlive the idle time by a margin: the server ends them first, or they see it gone.
            StandbyWorkers workers = StandbyWorkers.open(Duration.ofSeconds(idleSeconds + STANDBY_MARGIN_SECONDS),
                line -> log.println(Instant.now() + " " + line));
            StandbyWorkers.install(workers);
            return workers;
        } catch (RuntimeException e) {
            log.println(Instant.now() + " no standby workers: " + e.getMessage());
            return null;
        }
    }

    /** Removes the logs and lock files of servers of other builds that ended more than a day ago. */
    private static void pruneOldFiles(Path dir, PrintStream log) {
        long dayAgo = System.currentTimeMillis() - TimeUnit.DAYS.toMillis(1);
        try (var files = Files.list(dir)) {
            for (Path file : files.toList()) {
                String name = file.getFileName().toString();
                String socketName = name.endsWith(".sock.log") || name.endsWith(".sock.lock") ? name.substring(0, name.lastIndexOf('.')) : null;
                if (socketName != null && !Files.exists(dir.resolve(socketName)) && Files.getLastModifiedTime(file).toMillis() < dayAgo) {
                    Files.deleteIfExists(file);
                }
            }
        } catch (IOException e) {
            log.println("cannot prune " + dir + ": " + e);
        }
    }

    private static long idleSeconds(String value) {
        if (value == null || value.isBlank()) {
            return DEFAULT_IDLE_SECONDS;
        }
        long seconds = Launcher.parseWhole(value.strip());
        if (seconds < 1) {
            throw new IllegalArgumentException(IDLE_ENV + " must be a whole number of seconds, at least 1; got '" + value + "'");
        }
        return seconds;
    }

    private void serve(ServerSocketChannel server, UserPrincipal owner, PrintStream log) throws IOException {
        prepareNext();
        Thread.ofPlatform().daemon().name("dtorch-server-watchdog").start(() -> watch(log));
        while (true) {
            SocketChannel channel = server.accept();
            UnixDomainPrincipal peer = channel.getOption(ExtendedSocketOptions.SO_PEERCRED);
            if (!peer.user().getName().equals(owner.getName())) {
                log.println(Instant.now() + " refused a connection of user " + peer.user().getName());
                channel.close();
                continue;
            }
            Thread.ofPlatform().name("dtorch-server-run").start(() -> handle(channel, log));
        }
    }

    /** Ends the server when it was idle too long or its build changed; never during a run. */
    private void watch(PrintStream log) {
        while (true) {
            try {
                Thread.sleep(WATCH_MILLIS);
            } catch (InterruptedException e) {
                return;
            }
            if (busy.get()) {
                continue;
            }
            String reason = System.nanoTime() - lastRunEnd > idleNanos ? "idle for " + TimeUnit.NANOSECONDS.toSeconds(idleNanos) + " s"
                : build.changed() ? "its build changed" : null;
            if (reason != null && busy.compareAndSet(false, true)) {
                log.println(Instant.now() + " the server ends: " + reason);
                if (workers != null) {
                    workers.close();
                }
                try {
                    Files.deleteIfExists(socket);
                } catch (IOException e) {
                    log.println("cannot remove " + socket + ": " + e);
                }
                Runtime.getRuntime().halt(0);
            }
        }
    }

    private void prepareNext() {
        next = CompletableFuture.supplyAsync(() -> {
            long start = System.nanoTime();
            PreparedPython prepared = PreparedPython.prepare(routedOut, routedErr, ServerStreams.routedInput());
            serverLog.println(Instant.now() + " prepared a context in " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms");
            return prepared;
        }, runnable -> Thread.ofPlatform().daemon().name("dtorch-server-prepare").start(runnable));
    }

    private void handle(SocketChannel channel, PrintStream log) {
        try (channel) {
            InputStream in = Channels.newInputStream(channel);
            ServerWire.Writer out = new ServerWire.Writer(Channels.newOutputStream(channel));
            Thread timer = Thread.ofPlatform().daemon().start(() -> closeAfter(channel, REQUEST_SECONDS));
            ServerWire.Frame first = ServerWire.read(in);
            timer.interrupt();
            if (first == null || first.type() != ServerWire.REQUEST) {
                return;
            }
            ServerWire.Request request = ServerWire.Request.decode(first.payload());
            if (request.version() != ServerWire.VERSION) {
                out.write(ServerWire.DECLINE, ("protocol version " + request.version()).getBytes(StandardCharsets.UTF_8));
                return;
            }
            String refusal = refusal(request);
            if (refusal != null) {
                out.write(ServerWire.DECLINE, refusal.getBytes(StandardCharsets.UTF_8));
                return;
            }
            if (!busy.compareAndSet(false, true)) {
                out.write(ServerWire.DECLINE, "busy with another run".getBytes(StandardCharsets.UTF_8));
                return;
            }
            try {
                runOne(request, in, out, log);
            } finally {
                lastRunEnd = System.nanoTime();
                busy.set(false);
            }
        } catch (IOException | RuntimeException e) {
            log.println(Instant.now() + " a connection failed: " + e);
        }
    }

    /** Why this server does not take {@code request}'s run, or null: runs across nodes start their own JVMs. */
    private static String refusal(ServerWire.Request request) {
        if (request.args().isEmpty() || !request.args().getFirst().equals("run")) {
            return "not a run";
        }
        String nnodes = request.env().get("NNODES");
        if (nnodes != null && !nnodes.strip().equals("1") || request.args().stream().anyMatch(a -> a.startsWith("--nnodes"))) {
            return "a run across nodes";
        }
        return null;
    }

    private void runOne(ServerWire.Request request, InputStream in, ServerWire.Writer out, PrintStream log) throws IOException {
        PreparedPython prepared;
        long waitStart = System.nanoTime();
        try {
            prepared = next.get(PREPARE_SECONDS, TimeUnit.SECONDS);
            log.println(Instant.now() + " waited " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart) + " ms for a context");
        } catch (ExecutionException | TimeoutException | InterruptedException e) {
            log.println(Instant.now() + " no context for the run: " + e);
            prepareNext();
            out.write(ServerWire.DECLINE, ("no context: " + e).getBytes(StandardCharsets.UTF_8));
            return;
        }
        out.write(ServerWire.READY, new byte[0]);
        ServerWire.Frame go = ServerWire.read(in);
        if (go == null || go.type() != ServerWire.GO) {
            return; // the client gave up waiting; the prepared context stays for the next run
        }
        Run run = new Run(request, prepared, out, log);
        Thread.ofPlatform().daemon().name("dtorch-server-input").start(() -> run.readClient(in));
        long runStart = System.nanoTime();
        int code = run.execute();
        log.println(Instant.now() + " the run took " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - runStart) + " ms");
        if (run.usedPrepared) {
            prepareNext();
        }
        if (workers != null) {
            workers.replenish(); // for the configuration of the last per-device-process run, if there was one
        }
        log.println(Instant.now() + " ran " + request.args() + " in " + request.cwd() + ": exit " + code);
        out.write(ServerWire.EXIT, ServerWire.intPayload(code));
    }

    private static void closeAfter(SocketChannel channel, long seconds) {
        try {
            TimeUnit.SECONDS.sleep(seconds);
            channel.close();
        } catch (InterruptedException | IOException e) {
            // the request came in time
        }
    }

    /** One run: the launcher on the client's command line, with the prepared context. */
    private final class Run implements ScriptHosts {
        private final ServerWire.Request request;
        private final PreparedPython prepared;
        private final ServerWire.Writer out;
        private final PrintStream log;
        private final ServerStreams.Input input = new ServerStreams.Input();
        private final Path cwd;
        private volatile PythonHost host;
        private volatile int signal;
        private volatile boolean ended;
        private volatile Thread runner;
        private boolean usedPrepared;

        Run(ServerWire.Request request, PreparedPython prepared, ServerWire.Writer out, PrintStream log) {
            this.request = request;
            this.prepared = prepared;
            this.out = out;
            this.log = log;
            this.cwd = Path.of(request.cwd());
        }

        int execute() {
            runner = Thread.currentThread();
            ServerStreams.route(out, input);
            try {
                int code = Launcher.run(request.args().toArray(String[]::new), request.env(), this);
                return signal != 0 ? 128 + signal : code;
            } catch (RuntimeException | Error e) {
                if (signal != 0) {
                    return 128 + signal;
                }
                e.printStackTrace(); // to the client: the direct start would print it too
                return 1;
            } finally {
                System.out.flush();
                System.err.flush();
                ended = true;
                ServerStreams.route(null, null);
            }
        }

        @Override
        public Path workingDirectory() {
            return cwd;
        }

        @Override
        public PythonHost open(PyBridge bridge, Path isolatedDirectory) {
            PythonHost opened;
            if (isolatedDirectory == null) {
                usedPrepared = true;
                try {
                    opened = prepared.adopt(cwd, bridge);
                } catch (RuntimeException | Error e) {
                    prepared.close(); // a working directory Python cannot enter: the run fails, the context goes
                    throw e;
                }
            } else {
                opened = PythonHost.builder().bridge(bridge).isolatedIn(isolatedDirectory).out(routedOut).err(routedErr).in(input).build();
            }
            host = opened;
            if (signal != 0) {
                opened.cancel();
            }
            return opened;
        }

        /** Feeds the run's input and takes its signals until the client is gone. */
        void readClient(InputStream in) {
            try {
                ServerWire.Frame frame;
                while ((frame = ServerWire.read(in)) != null) {
                    switch (frame.type()) {
                        case ServerWire.STDIN -> input.feed(frame.payload());
                        case ServerWire.STDIN_EOF -> input.end();
                        case ServerWire.SIGNAL -> stop(frame.intPayload());
                        default -> {
                            // nothing else comes from a client during a run
                        }
                    }
                }
            } catch (IOException e) {
                // the client is gone
            }
            if (!ended) {
                stop(1); // the client vanished (its terminal closed, or it was killed): as SIGHUP would
            }
        }

        private void stop(int number) {
            if (ended || signal != 0) {
                return;
            }
            signal = number;
            ServerStreams.mute();
            input.end();
            PythonHost current = host;
            if (current != null) {
                try {
                    current.cancel();
                } catch (RuntimeException e) {
                    log.println("cancelling the run: " + e);
                }
            }
            Thread thread = runner;
            Thread.ofPlatform().daemon().start(() -> {
                try {
                    thread.join(TimeUnit.SECONDS.toMillis(STOP_GRACE_SECONDS));
                } catch (InterruptedException e) {
                    return;
                }
                if (!ended) {
                    log.println(Instant.now() + " a stopped run did not end within " + STOP_GRACE_SECONDS + " s; the server ends");
                    Runtime.getRuntime().halt(1);
                }
            });
        }
    }

    /**
     * The files of the build this server runs: the class path's entries and the launcher's class files, with their
     * sizes and times. Thread-safe: immutable.
     */
    private record BuildStamp(String files) {
        static BuildStamp ofThisProcess() {
            return new BuildStamp(describe());
        }

        boolean changed() {
            return !files.equals(describe());
        }

        private static String describe() {
            StringBuilder b = new StringBuilder();
            for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
                Path path = Path.of(entry);
                try (var files = Files.isDirectory(path) ? Files.walk(path) : java.util.stream.Stream.of(path)) {
                    files.filter(Files::isRegularFile).forEach(f -> {
                        try {
                            b.append(f).append(' ').append(Files.size(f)).append(' ').append(Files.getLastModifiedTime(f)).append('\n');
                        } catch (IOException e) {
                            b.append(f).append(" gone\n");
                        }
                    });
                } catch (IOException | UncheckedIOException e) {
                    b.append(entry).append(" unreadable\n");
                }
            }
            return b.toString();
        }
    }
}
