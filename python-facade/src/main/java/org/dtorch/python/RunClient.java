package org.dtorch.python;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * {@code ./dtorch run}'s client of the warm runtime server ({@link RunServer}): it sends the command line, the working
 * directory and the environment, forwards standard input, the run's output and the signals INT, TERM and HUP (which
 * stop the script, not the server), and exits with the run's exit code. It loads few classes and starts in a fraction
 * of the launcher's time.
 *
 * <p>When the server does not take the run (no server answers on the socket, it is busy with another run, or the run
 * is one it does not serve), the client starts the launcher's JVM itself, with the command {@value #LAUNCH_ENV} gives
 * (one argument a line), passes it the terminal, forwards the signals it receives and exits with its exit code; where
 * no server answered, that launcher starts a new server when its run ends ({@link ServerSpawn}). A server that stops
 * during a run is reported on standard error, exit code {@value #SERVER_LOST}.
 *
 * <p>{@code RunClient SOCKET run-arguments...}. Not thread-safe: a program entry point.
 */
final class RunClient {
    /** Environment variable the {@code dtorch} script sets: the launcher's JVM command, one argument a line. */
    static final String LAUNCH_ENV = "DTORCH_LAUNCH";
    /** The exit code of a run whose server stopped before it ended. */
    static final int SERVER_LOST = 1;
    /** How long the client waits for the server to have a context ready. */
    static final long READY_SECONDS = 120;
    /** How long the client waits for the run to end after it forwarded a signal. */
    static final long SIGNAL_GRACE_SECONDS = 10;

    private final Path socket;
    private final OutputStream stdout = new FileOutputStream(FileDescriptor.out);
    private final OutputStream stderr = new FileOutputStream(FileDescriptor.err);
    /** Counted down when the run's last frame (or the end of the connection) arrived. */
    private final CountDownLatch ended = new CountDownLatch(1);
    private volatile boolean finished;

    private RunClient(Path socket) {
        this.socket = socket;
    }

    public static void main(String[] args) throws Exception {
        RunClient client = new RunClient(Path.of(args[0]));
        System.exit(client.run(Arrays.asList(args).subList(1, args.length)));
    }

    private int run(List<String> args) throws IOException, InterruptedException {
        SocketChannel channel;
        try {
            channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            channel.connect(UnixDomainSocketAddress.of(socket));
        } catch (IOException e) {
            return direct(args, true); // a socket left by a server that is gone
        }
        InputStream in = Channels.newInputStream(channel);
        ServerWire.Writer out = new ServerWire.Writer(Channels.newOutputStream(channel));
        ServerWire.Frame answer;
        Thread watchdog = Thread.ofPlatform().daemon().start(() -> closeAfter(channel, READY_SECONDS));
        try {
            Map<String, String> env = new HashMap<>(System.getenv());
            env.remove(LAUNCH_ENV);
            out.write(ServerWire.REQUEST, new ServerWire.Request(ServerWire.VERSION, Path.of("").toAbsolutePath().toString(), args, env)
                .encode());
            answer = ServerWire.read(in);
        } catch (IOException e) {
            answer = null;
        }
        watchdog.interrupt();
        if (answer == null) {
            channel.close(); // the server is gone, or it prepared nothing in time: a direct start, and a new server
            return direct(args, true);
        }
        if (answer.type() != ServerWire.READY) {
            channel.close();
            return direct(args, false);
        }
        out.write(ServerWire.GO, new byte[0]);
        // INT, TERM and HUP start the JVM's shutdown, which runs this hook and then exits with 128 + the signal's number,
        // the exit code of a direct start stopped so.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> stopRun(out)));
        Thread.ofPlatform().daemon().name("dtorch-stdin").start(() -> pumpInput(out));
        return relay(in);
    }

    /** Copies the run's output until its EXIT frame; the exit code. */
    private int relay(InputStream in) throws IOException {
        while (true) {
            ServerWire.Frame frame;
            try {
                frame = ServerWire.read(in);
            } catch (IOException e) {
                frame = null;
            }
            if (frame == null) {
                ended.countDown();
                stderr.write(("dtorch: the runtime server stopped during the run (its log: " + socket + ".log); the next run "
                    + "starts a new one\n").getBytes(StandardCharsets.UTF_8));
                return SERVER_LOST;
            }
            switch (frame.type()) {
                case ServerWire.STDOUT -> stdout.write(frame.payload());
                case ServerWire.STDERR -> stderr.write(frame.payload());
                case ServerWire.EXIT -> {
                    finished = true;
                    ended.countDown();
                    return frame.intPayload();
                }
                default -> {
                    // a frame this client does not know: newer servers decline older clients, so none should come
                }
            }
        }
    }

    /** At a signal: asks the server to stop the run, and waits a while for it to end. */
    private void stopRun(ServerWire.Writer out) {
        if (finished) {
            return; // the run ended: this is the client's own exit
        }
        try {
            out.write(ServerWire.SIGNAL, ServerWire.intPayload(2));
            ended.await(SIGNAL_GRACE_SECONDS, TimeUnit.SECONDS);
        } catch (IOException | InterruptedException e) {
            // the server is gone: nothing runs any more
        }
    }

    private static void pumpInput(ServerWire.Writer out) {
        InputStream stdin = new java.io.FileInputStream(FileDescriptor.in);
        byte[] buffer = new byte[8192];
        try {
            int n;
            while ((n = stdin.read(buffer)) >= 0) {
                if (n > 0) {
                    out.write(ServerWire.STDIN, buffer, 0, n);
                }
            }
            out.write(ServerWire.STDIN_EOF, new byte[0]);
        } catch (IOException e) {
            // the run ended, or standard input cannot be read: the script sees the end of its input
        }
    }

    private static void closeAfter(SocketChannel channel, long seconds) {
        try {
            TimeUnit.SECONDS.sleep(seconds);
            channel.close();
        } catch (InterruptedException | IOException e) {
            // answered in time
        }
    }

    /**
     * Runs the launcher's JVM with this process's terminal and returns its exit code; with {@code startServer}, that
     * launcher starts a new server on the socket after its run. Signals that reach this process reach it too.
     */
    private int direct(List<String> args, boolean startServer) throws IOException, InterruptedException {
        String launch = System.getenv(LAUNCH_ENV);
        if (launch == null || launch.isBlank()) {
            stderr.write(("dtorch: the runtime server at " + socket + " did not take the run, and " + LAUNCH_ENV + " does not say "
                + "how to start it directly; run with --no-server\n").getBytes(StandardCharsets.UTF_8));
            return 2;
        }
        List<String> command = new ArrayList<>(List.of(launch.split("\n")));
        command.add("org.dtorch.python.Launcher"); // by name: the client loads none of the launcher's classes
        command.addAll(args);
        ProcessBuilder builder = new ProcessBuilder(command).inheritIO();
        builder.environment().remove(LAUNCH_ENV);
        if (startServer) {
            builder.environment().put(ServerSpawn.SOCKET_ENV, socket.toString());
        }
        Process launcher = builder.start();
        // A terminal's Ctrl-C reaches the launcher itself (it is in this process's group); a signal sent to this process
        // alone stops the launcher with SIGTERM. Either way this process exits with 128 + its signal's number.
        Thread stop = new Thread(() -> {
            if (launcher.isAlive()) {
                launcher.destroy();
                try {
                    launcher.waitFor(SIGNAL_GRACE_SECONDS, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        Runtime.getRuntime().addShutdownHook(stop);
        int code = launcher.waitFor();
        try {
            Runtime.getRuntime().removeShutdownHook(stop);
        } catch (IllegalStateException e) {
            // a signal started the shutdown: the hook is running, and the exit code is the signal's
        }
        return code;
    }
}
