package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code ./dtorch run} with its warm runtime server, as a user runs it: real {@code ./dtorch} processes, a real server
 * JVM, real signals. A run the server serves gives the output and exit code of a direct start ({@code --no-server}),
 * keeps nothing of an earlier script, stops on Ctrl-C while the server stays, survives its server being killed, turns
 * away another user, and moves to a new server when the checkout is rebuilt. The servers live in this class's own
 * runtime directory ({@code XDG_RUNTIME_DIR}) and are ended after the class. In the slow run: each case starts
 * {@code ./dtorch} cold several times (tens of seconds each on two cores) besides a server.
 */
@Tag("multiprocess")
@Tag("slow")
@Timeout(900)
class RunServerTest {
    private static final Path ROOT = RepositoryPaths.resolve("");
    private static final Path SCRIPTS = RepositoryPaths.resolve("python-facade/src/test/python/server");
    /** Every ./dtorch process gets this long (a cold start on a loaded two-core machine takes tens of seconds). */
    private static final Duration RUN_DEADLINE = Duration.ofSeconds(300);
    private static final Pattern SERVER_LINE = Pattern.compile("dtorch runtime server (\\d+) serves (\\S+)");

    @TempDir
    static Path runtimeDir;
    @TempDir
    static Path work;

    /** The output and exit code of one {@code ./dtorch} process. */
    record Outcome(int code, String out, String err) {
    }

    /**
     * A copy of the checkout's launcher ({@code dtorch}, {@code python-facade/target}'s classes, class path and JIT mode):
     * the rebuild case changes a file of this copy, which only the servers of this class see, never the server of another
     * test class that runs beside it on the real checkout.
     */
    @TempDir
    static Path checkout;

    @BeforeAll
    static void stageScripts() throws IOException {
        try (Stream<Path> files = Files.list(SCRIPTS)) {
            for (Path file : files.toList()) {
                Files.copy(file, work.resolve(file.getFileName()), StandardCopyOption.REPLACE_EXISTING);
            }
        }
        Path target = ROOT.resolve("python-facade/target");
        Path copied = checkout.resolve("python-facade/target");
        Files.createDirectories(copied);
        // The refusal case runs the client as another user, who reads its classes from here.
        Files.setPosixFilePermissions(checkout, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.copy(ROOT.resolve("dtorch"), checkout.resolve("dtorch"), StandardCopyOption.COPY_ATTRIBUTES);
        for (String file : List.of("launcher.classpath", "jit-mode")) {
            if (Files.exists(target.resolve(file))) {
                Files.copy(target.resolve(file), copied.resolve(file));
            }
        }
        try (Stream<Path> tree = Files.walk(target.resolve("classes"))) {
            for (Path from : tree.toList()) {
                Path to = copied.resolve("classes").resolve(target.resolve("classes").relativize(from).toString());
                if (Files.isDirectory(from)) {
                    Files.createDirectories(to);
                } else {
                    Files.copy(from, to);
                }
            }
        }
    }

    @AfterAll
    static void stopServers() {
        String dir = runtimeDir.toString();
        ProcessHandle.allProcesses()
            .filter(p -> p.info().arguments().map(args -> Stream.of(args).anyMatch(a -> a.contains(dir))).orElse(false))
            .forEach(ProcessHandle::destroyForcibly);
    }

    @Test
    void shouldGiveTheOutputAndExitCodeOfADirectStart() throws Exception {
        awaitServer();
        String input = "first\nsecond\n";
        for (List<String> args : List.of(List.of("run", "echo_input.py", "exit3"), List.of("run", "echo_input.py"),
            List.of("run", "--devices", "gpu:2", "echo_input.py"))) {
            Outcome direct = dtorch(input, withNoServer(args));
            int served = servedRuns();
            Outcome warm = dtorch(input, args);
            assertEquals(served + 1, servedRuns(), "the server did not serve " + args);
            assertEquals(direct, warm, "./dtorch " + args + " through the server differs from a direct start");
        }
    }

    @Test
    void shouldRunTheQuickstartAsADirectStartDoes() throws Exception {
        awaitServer();
        List<String> args = List.of("run", ROOT.resolve("examples/python/quickstart.py").toString());
        Outcome direct = dtorch(null, withNoServer(args));
        int served = servedRuns();
        Outcome warm = dtorch(null, args);
        assertEquals(served + 1, servedRuns(), "the server did not serve the quickstart");
        assertEquals(0, warm.code(), warm.toString());
        assertEquals(direct, warm);
    }

    @Test
    void shouldShowAScriptNothingOfAnEarlierOne() throws Exception {
        awaitServer();
        int served = servedRuns();
        assertEquals(new Outcome(0, "state left\n", ""), dtorch(null, List.of("run", "leave_state.py")));
        Outcome fresh = dtorch(null, List.of("run", "check_state.py"));
        assertEquals(new Outcome(0, "False False False False False\n", ""), fresh);
        assertEquals(new Outcome(0, "state left\n", ""), dtorch(null, List.of("run", "leave_state.py")));
        Outcome isolated = dtorch(null, List.of("run", "--isolated", "check_state.py"));
        assertEquals(new Outcome(0, "False False False False False\n", ""), isolated);
        assertEquals(served + 4, servedRuns(), "the server did not serve every run");
    }

    @Test
    void shouldConfineAnIsolatedScriptAsADirectStartDoes() throws Exception {
        awaitServer();
        Path isolated = Files.createDirectories(work.resolve("isolated"));
        try (Stream<Path> files = Files.list(RepositoryPaths.resolve("python-facade/src/test/python/isolated"))) {
            for (Path file : files.toList()) {
                Files.copy(file, isolated.resolve(file.getFileName()), StandardCopyOption.REPLACE_EXISTING);
            }
        }
        if (!Files.exists(isolated.resolve("passwd"), java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            Files.createSymbolicLink(isolated.resolve("passwd"), Path.of("/etc/passwd"));
        }
        int served = servedRuns();
        Outcome outcome = dtorch(null, List.of("run", "--isolated", "--devices", "cpu:2", "isolated/check_isolation.py"));
        assertEquals(served + 1, servedRuns());
        assertEquals(0, outcome.code(), outcome.toString());
        assertTrue(outcome.out().contains("isolated: all checks passed"), outcome.toString());
        assertFalse(Files.exists(isolated.resolve("new.txt")), "the isolated script wrote next to itself");
    }

    @Test
    void shouldStopTheScriptAndNotTheServerOnCtrlC() throws Exception {
        awaitServer();
        int directCode = interruptAfterStart(withNoServer(List.of("run", "wait_for_signal.py")));
        long server = serverPid();
        int served = servedRuns();
        int warmCode = interruptAfterStart(List.of("run", "wait_for_signal.py"));
        assertEquals(130, directCode, "a direct start stopped by SIGINT");
        assertEquals(directCode, warmCode, "a run in the server stopped by SIGINT");
        assertEquals(served + 1, servedRuns());
        assertTrue(ProcessHandle.of(server).map(ProcessHandle::isAlive).orElse(false), "Ctrl-C stopped the server");
        Outcome next = dtorch(null, List.of("run", "check_state.py"));
        assertEquals(new Outcome(0, "False False False False False\n", ""), next);
        assertEquals(served + 2, servedRuns(), "the server did not serve the run after the interrupted one");
    }

    @Test
    void shouldReportAServerKilledMidRunAndStartANewOne() throws Exception {
        awaitServer();
        long server = serverPid();
        Process run = start(List.of("run", "wait_for_signal.py"));
        Await.until(() -> read(outFile(run)).contains("started"), RUN_DEADLINE, "the script's first line");
        ProcessHandle.of(server).orElseThrow().destroyForcibly();
        assertTrue(run.waitFor(RUN_DEADLINE.toSeconds(), TimeUnit.SECONDS), "the client did not end with its server");
        assertEquals(RunClient.SERVER_LOST, run.exitValue());
        assertTrue(read(errFile(run)).contains("the runtime server stopped during the run"), read(errFile(run)));
        Outcome next = dtorch(null, List.of("run", "check_state.py"));
        assertEquals(new Outcome(0, "False False False False False\n", ""), next);
        // The run after the kill starts a new server in the background; the killed one's socket file and log lines stay
        // until the new one takes the socket over.
        Await.until(() -> latestServerPid() > 0 && latestServerPid() != server, RUN_DEADLINE,
            () -> "a server other than the killed " + server + "; logs:\n" + logs());
        awaitServer();
        assertNotEquals(server, serverPid(), "no new server started after the killed one");
    }

    @Test
    void shouldTurnAwayAnotherUser() throws Exception {
        Path setpriv = Path.of("/usr/bin/setpriv");
        assumeTrue(ProcessHandle.current().info().user().orElse("").equals("root") && Files.isExecutable(setpriv),
            "needs root and setpriv to run a client as another user");
        awaitServer();
        Path socket = socket().orElseThrow();
        int served = servedRuns();
        // The runtime directory is the owner's alone: another user's client cannot reach the socket at all.
        Outcome denied = asNobody(setpriv, socket);
        assertEquals(2, denied.code(), denied.toString());
        assertTrue(denied.err().contains("did not take the run"), denied.toString());
        // Opened up on purpose, the socket is reachable; the server checks the peer's credentials and refuses.
        Path serverDir = socket.getParent();
        try {
            Files.setPosixFilePermissions(runtimeDir, PosixFilePermissions.fromString("rwx--x--x"));
            Files.setPosixFilePermissions(serverDir, PosixFilePermissions.fromString("rwx--x--x"));
            Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-rw-rw-"));
            Outcome refused = asNobody(setpriv, socket);
            assertEquals(2, refused.code(), refused.toString());
            Await.until(() -> logs().contains("refused a connection of user nobody"), RUN_DEADLINE, "the server's refusal in its log");
        } finally {
            Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
            Files.setPosixFilePermissions(serverDir, PosixFilePermissions.fromString("rwx------"));
            Files.setPosixFilePermissions(runtimeDir, PosixFilePermissions.fromString("rwx------"));
        }
        assertEquals(served, servedRuns(), "another user's run was served");
    }

    @Test
    void shouldMoveToANewServerWhenTheCheckoutIsRebuilt() throws Exception {
        awaitServer();
        Path oldSocket = socket().orElseThrow();
        Path rebuilt = checkout.resolve("python-facade/target/classes/rebuilt-by-RunServerTest");
        try {
            Files.writeString(rebuilt, "a file of a newer build\n");
            Await.until(() -> read(Path.of(oldSocket + ".log")).contains("its build changed"), RUN_DEADLINE,
                "the old server to see that its build changed");
            assertEquals(new Outcome(0, "False False False False False\n", ""), dtorch(null, List.of("run", "check_state.py")));
            awaitServer();
            assertNotEquals(oldSocket, socket().orElseThrow(), "the rebuilt checkout is served by the old server's socket");
            int served = servedRuns();
            assertEquals(new Outcome(0, "False False False False False\n", ""), dtorch(null, List.of("run", "check_state.py")));
            assertEquals(served + 1, servedRuns(), "the new server did not serve the rebuilt checkout's run");
        } finally {
            Files.deleteIfExists(rebuilt);
            // The server of the build with the file sees it change back and ends: the next test starts from no server.
            Optional<Path> current = socket();
            if (current.isPresent()) {
                Await.until(() -> !Files.exists(current.get()), RUN_DEADLINE, "the server of the rebuilt checkout to end");
            }
        }
    }

    // ---- helpers

    private static List<String> withNoServer(List<String> args) {
        List<String> direct = new ArrayList<>(args);
        direct.add(1, "--no-server");
        return direct;
    }

    private static ProcessBuilder builder(List<String> args, Path out, Path err) {
        List<String> command = new ArrayList<>();
        command.add(checkout.resolve("dtorch").toString());
        command.addAll(args);
        ProcessBuilder builder = new ProcessBuilder(command).directory(work.toFile())
            .redirectOutput(out.toFile()).redirectError(err.toFile());
        Map<String, String> env = builder.environment();
        env.remove("DTORCH_SERVER");
        env.put("XDG_RUNTIME_DIR", runtimeDir.toString());
        env.put("DTORCH_SERVER_IDLE_SECONDS", "900");
        env.put("JAVA_HOME", System.getProperty("java.home"));
        return builder;
    }

    private static final List<Process> STARTED = new ArrayList<>();

    private static Process start(List<String> args) throws IOException {
        Path out = Files.createTempFile(work, "out", ".txt");
        Path err = Files.createTempFile(work, "err", ".txt");
        Process process = builder(args, out, err).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
        synchronized (STARTED) {
            STARTED.add(process);
        }
        OUTPUTS.put(process, new Path[] {out, err});
        return process;
    }

    private static final Map<Process, Path[]> OUTPUTS = new java.util.concurrent.ConcurrentHashMap<>();

    private static Path outFile(Process p) {
        return OUTPUTS.get(p)[0];
    }

    private static Path errFile(Process p) {
        return OUTPUTS.get(p)[1];
    }

    /** Runs {@code ./dtorch args} with {@code input} (or none) as standard input, to its end. */
    private static Outcome dtorch(String input, List<String> args) throws IOException, InterruptedException {
        Path out = Files.createTempFile(work, "out", ".txt");
        Path err = Files.createTempFile(work, "err", ".txt");
        Process process = builder(args, out, err).start();
        try (OutputStream stdin = process.getOutputStream()) {
            if (input != null) {
                stdin.write(input.getBytes(StandardCharsets.UTF_8));
            }
        }
        if (!process.waitFor(RUN_DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("./dtorch " + args + " did not end within " + RUN_DEADLINE + "; output so far:\n" + read(out)
                + read(err));
        }
        return new Outcome(process.exitValue(), read(out), read(err));
    }

    /** Starts {@code ./dtorch args}, sends SIGINT once the script printed its first line, and returns the exit code. */
    private static int interruptAfterStart(List<String> args) throws Exception {
        Process process = start(args);
        Await.until(() -> read(outFile(process)).contains("started"), RUN_DEADLINE, "the script's first line, of " + args);
        new ProcessBuilder("kill", "-INT", Long.toString(process.pid())).inheritIO().start().waitFor();
        assertTrue(process.waitFor(RUN_DEADLINE.toSeconds(), TimeUnit.SECONDS), "./dtorch " + args + " did not stop on SIGINT");
        assertFalse(read(outFile(process)).contains("not stopped"), read(outFile(process)));
        return process.exitValue();
    }

    /** Runs the client as user nobody against {@code socket}, with no way to start the launcher itself. */
    private static Outcome asNobody(Path setpriv, Path socket) throws IOException, InterruptedException {
        Path out = Files.createTempFile("nobody", ".out");
        Path err = Files.createTempFile("nobody", ".err");
        try {
            ProcessBuilder builder = new ProcessBuilder(setpriv.toString(), "--reuid=65534", "--regid=65534", "--clear-groups",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
                checkout.resolve("python-facade/target/classes").toString(), RunClient.class.getName(), socket.toString(), "run",
                "check_state.py").directory(Path.of("/").toFile()).redirectOutput(out.toFile()).redirectError(err.toFile());
            builder.environment().remove(RunClient.LAUNCH_ENV);
            Process process = builder.start();
            assertTrue(process.waitFor(RUN_DEADLINE.toSeconds(), TimeUnit.SECONDS), "the other user's client did not end");
            return new Outcome(process.exitValue(), read(out), read(err));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    private static Path serverDir() {
        return runtimeDir.resolve("dtorch-server");
    }

    /** The socket of the server that serves this checkout now, if one does. */
    private static Optional<Path> socket() {
        if (!Files.isDirectory(serverDir())) {
            return Optional.empty();
        }
        try (Stream<Path> files = Files.list(serverDir())) {
            return files.filter(p -> p.getFileName().toString().endsWith(".sock") && Files.exists(p)).findFirst();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static long serverPid() {
        long pid = latestServerPid();
        assertTrue(pid > 0, "no server line in the log of " + socket());
        return pid;
    }

    /** The process id in the last server line of the socket's log; -1 while no socket or no such line exists. */
    private static long latestServerPid() {
        Optional<Path> socket = socket();
        if (socket.isEmpty()) {
            return -1;
        }
        Matcher m = SERVER_LINE.matcher(latestServerLog(socket.get()));
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    /** Waits until a server serves this checkout with a context ready; starts one through a direct run if none does. */
    private static void awaitServer() throws IOException, InterruptedException {
        if (socket().isEmpty()) {
            Outcome first = dtorch(null, List.of("run", "check_state.py"));
            assertEquals(0, first.code(), first.toString());
        }
        Await.until(() -> socket().isPresent() && latestServerLog(socket().get()).contains("prepared a context"), RUN_DEADLINE,
            () -> "a server with a prepared context in " + serverDir() + "; logs:\n" + logs());
    }

    /**
     * The part of the socket's log written by the server that started last: a killed server leaves its socket file and
     * its lines behind, and its successor appends to the same log.
     */
    private static String latestServerLog(Path socket) {
        String log = read(Path.of(socket + ".log"));
        Matcher m = SERVER_LINE.matcher(log);
        int start = -1;
        while (m.find()) {
            if (m.group(2).equals(socket.toString())) {
                start = m.start();
            }
        }
        return start < 0 ? "" : log.substring(start);
    }

    /** How many runs the servers of this class have served. */
    private static int servedRuns() {
        return (int) logs().lines().filter(line -> line.contains(" ran [")).count();
    }

    private static String logs() {
        if (!Files.isDirectory(serverDir())) {
            return "";
        }
        try (Stream<Path> files = Files.list(serverDir())) {
            StringBuilder all = new StringBuilder();
            files.filter(p -> p.getFileName().toString().endsWith(".log")).sorted().forEach(p -> all.append(read(p)));
            return all.toString();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static String read(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
