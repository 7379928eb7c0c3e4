package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code ./dtorch run --per-device-process} with the warm runtime server, which keeps worker JVMs on standby for the next
 * such run: real {@code ./dtorch} processes, a real server, real worker JVMs. A run with adopted workers gives the output
 * and exit code of a direct start; two runs never share a worker process; a run of another device count starts its own
 * workers and still works; a server killed with SIGKILL leaves no standby worker behind. In the slow run: every case
 * starts several runs of four worker JVMs each on two cores.
 */
@Tag("multiprocess")
@Tag("slow")
@Timeout(1200)
class RunServerWorkersTest {
    private static final Path ROOT = RepositoryPaths.resolve("");
    private static final Path SCRIPTS = RepositoryPaths.resolve("python-facade/src/test/python/server");
    private static final Duration RUN_DEADLINE = Duration.ofSeconds(300);
    private static final Pattern SERVER_LINE = Pattern.compile("dtorch runtime server (\\d+) serves (\\S+)");
    private static final Pattern PREPARED = Pattern.compile("prepared (\\d+) standby workers, pids \\[([0-9, ]+)\\]");
    private static final Pattern ADOPTED = Pattern.compile("a runtime adopts \\d+ standby workers, pids \\[([0-9, ]+)\\]");
    private static final String WORKER_MAIN = "org.dtorch.core.runtime.process.WorkerMain";
    private static final Pattern TEARDOWN_WARNING = Pattern.compile(
        "(?m)^.* org\\.dtorch\\.core\\.runtime\\.process\\.ProcessFleet \\S+\\R"
        + "WARNING: device \\d+ did not stop within the teardown grace; killing its worker process\\R");

    @TempDir
    static Path runtimeDir;
    @TempDir
    static Path work;

    /** The output and exit code of one {@code ./dtorch} process. */
    record Outcome(int code, String out, String err) {
    }

    @BeforeAll
    static void stageScripts() throws IOException {
        try (Stream<Path> files = Files.list(SCRIPTS)) {
            for (Path file : files.toList()) {
                Files.copy(file, work.resolve(file.getFileName()), StandardCopyOption.REPLACE_EXISTING);
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
    void shouldGiveTheOutputAndExitCodeOfADirectStartWithAdoptedWorkers() throws Exception {
        List<Long> standby = standbyFor(4);
        List<String> args = List.of("run", "--per-device-process", "--devices", "cpu:4", "sum_over_devices.py", "4");
        Outcome direct = dtorch(withNoServer(args));
        Outcome warm = dtorch(args);
        assertEquals(3, warm.code(), warm.toString());
        assertSumAsTorchs(warm);
        assertEquals(comparable(direct), comparable(warm), "a run with adopted workers differs from a direct start");
        assertEquals(standby, lastAdopted(), "the run did not adopt the prepared workers: " + logs());
    }

    @Test
    void shouldNeverShareAWorkerProcessBetweenRuns() throws Exception {
        standbyFor(4);
        Set<Long> first = workersOfAHeldRun();
        Set<Long> second = workersOfAHeldRun();
        assertEquals(4, first.size());
        assertEquals(4, second.size());
        assertTrue(Collections.disjoint(first, second), "two runs shared a worker process: " + first + " " + second);
    }

    @Test
    void shouldStartItsOwnWorkersForAnotherDeviceCount() throws Exception {
        List<Long> standby = standbyFor(4);
        List<String> args = List.of("run", "--per-device-process", "--devices", "cpu:2", "sum_over_devices.py", "2");
        int served = servedRuns();
        int before = logs().length();
        Outcome warm = dtorch(args);
        assertEquals(served + 1, servedRuns(), "the server did not serve the run of 2 devices");
        assertTrue(logs().substring(before).contains("the standby workers are 4 cpu workers; the runtime wants 2 cpu workers"), logs());
        awaitEnded(standby, "the standby workers made for 4 devices to end");
        assertEquals(comparable(dtorch(withNoServer(args))), comparable(warm), "a run of another device count differs from a direct start");
        assertEquals(3, warm.code(), warm.toString());
        assertSumAsTorchs(warm);
    }

    @Test
    void shouldLeaveNoStandbyWorkerWhenTheServerIsKilled() throws Exception {
        List<Long> standby = standbyFor(4);
        assertTrue(standby.stream().allMatch(RunServerWorkersTest::alive), "the standby workers are not alive: " + standby);
        ProcessHandle.of(serverPid()).orElseThrow().destroyForcibly();
        awaitEnded(standby, "the standby workers of a server killed with SIGKILL to end");
    }

    // ---- helpers

    /** The distributed sum {@code sum_over_devices.py} prints first equals torch's, printed after it. */
    private static void assertSumAsTorchs(Outcome outcome) {
        String[] values = outcome.out().strip().split(" ");
        assertEquals(2, values.length, outcome.toString());
        assertEquals(Double.parseDouble(values[1]), Double.parseDouble(values[0]), "the distributed sum against torch's: " + outcome);
    }

    /**
     * {@code outcome} without the runtime's warning that a worker did not exit within the teardown grace and was killed:
     * whether a worker JVM's exit takes longer than the grace depends on the machine's load, in a direct start as in a
     * served run, and the warning carries the time of day.
     */
    private static Outcome comparable(Outcome outcome) {
        return new Outcome(outcome.code(), outcome.out(), TEARDOWN_WARNING.matcher(outcome.err()).replaceAll(""));
    }

    /**
     * Serves a run of {@code devices} worker processes so that the server prepares a set for that configuration, and
     * returns the pids of the set it prepared after it.
     */
    private static List<Long> standbyFor(int devices) throws IOException, InterruptedException {
        awaitServer();
        int served = servedRuns();
        Outcome outcome = dtorch(List.of("run", "--per-device-process", "--devices", "cpu:" + devices, "sum_over_devices.py",
            String.valueOf(devices)));
        assertEquals(3, outcome.code(), outcome.toString());
        assertEquals(served + 1, servedRuns(), "the server did not serve the run that names the configuration");
        // The server logs the run's end before it answers the client: a set prepared later is the one for the next run.
        int afterRun = logs().length();
        Await.until(() -> preparedSets(logs().substring(afterRun)).size() > 0, RUN_DEADLINE,
            () -> "a set of standby workers prepared after the run; logs:\n" + logs());
        List<Long> set = preparedSets(logs().substring(afterRun)).getFirst();
        assertEquals(devices, set.size(), logs());
        return set;
    }

    /** The worker pids of a served run of {@code hold_until.py}, taken from the process table while it runs. */
    private static Set<Long> workersOfAHeldRun() throws IOException, InterruptedException {
        long server = serverPid();
        Path release = work.resolve("release-" + System.nanoTime());
        Path out = Files.createTempFile(work, "out", ".txt");
        Path err = Files.createTempFile(work, "err", ".txt");
        int served = servedRuns();
        Process run = builder(List.of("run", "--per-device-process", "hold_until.py", release.toString()), out, err)
            .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
        try {
            Await.until(() -> read(out).contains("started"), RUN_DEADLINE, () -> "the held run's first lines; so far:\n" + read(out) + read(err));
            Set<Long> workers = ProcessHandle.of(server).orElseThrow().children()
                .filter(p -> p.info().arguments().map(a -> List.of(a).contains(WORKER_MAIN)).orElse(false))
                .map(ProcessHandle::pid).collect(Collectors.toSet());
            assertEquals(new HashSet<>(lastAdopted()), workers, "the run's workers are not the set it adopted: " + logs());
            Files.writeString(release, "go\n");
            assertTrue(run.waitFor(RUN_DEADLINE.toSeconds(), TimeUnit.SECONDS), "the held run did not end once released");
            assertEquals(0, run.exitValue(), read(out) + read(err));
            assertEquals(served + 1, servedRuns(), "the server did not serve the held run");
            awaitEnded(List.copyOf(workers), "the held run's workers to end with it");
            return workers;
        } finally {
            run.destroyForcibly();
        }
    }

    private static List<String> withNoServer(List<String> args) {
        List<String> direct = new ArrayList<>(args);
        direct.add(1, "--no-server");
        return direct;
    }

    private static ProcessBuilder builder(List<String> args, Path out, Path err) {
        List<String> command = new ArrayList<>();
        command.add(ROOT.resolve("dtorch").toString());
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

    /** Runs {@code ./dtorch args} with no standard input, to its end. */
    private static Outcome dtorch(List<String> args) throws IOException, InterruptedException {
        Path out = Files.createTempFile(work, "out", ".txt");
        Path err = Files.createTempFile(work, "err", ".txt");
        Process process = builder(args, out, err).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
        if (!process.waitFor(RUN_DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("./dtorch " + args + " did not end within " + RUN_DEADLINE + "; output so far:\n" + read(out)
                + read(err));
        }
        return new Outcome(process.exitValue(), read(out), read(err));
    }

    private static boolean alive(long pid) {
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    }

    private static void awaitEnded(List<Long> pids, String what) {
        Await.until(() -> pids.stream().noneMatch(RunServerWorkersTest::alive), RUN_DEADLINE, () -> what + ": pids " + pids);
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
        Path socket = socket().orElseThrow();
        Matcher m = SERVER_LINE.matcher(read(Path.of(socket + ".log")));
        long pid = -1;
        while (m.find()) {
            if (m.group(2).equals(socket.toString())) {
                pid = Long.parseLong(m.group(1));
            }
        }
        assertTrue(pid > 0, "no server line in the log of " + socket);
        return pid;
    }

    /**
     * Waits until a live server serves this checkout with a context ready; starts one through a direct run if none does
     * (none yet, or the last one was killed and left its socket).
     */
    private static void awaitServer() throws IOException, InterruptedException {
        if (socket().isEmpty() || !alive(serverPid())) {
            Outcome first = dtorch(List.of("run", "check_state.py"));
            assertEquals(0, first.code(), first.toString());
        }
        Await.until(RunServerWorkersTest::serverReady, RUN_DEADLINE, () -> "a server with a prepared context in " + serverDir()
            + "; logs:\n" + logs());
    }

    /** Whether the server that last started on this checkout's socket lives and has prepared a context since it started. */
    private static boolean serverReady() {
        Optional<Path> socket = socket();
        if (socket.isEmpty()) {
            return false;
        }
        String log = read(Path.of(socket.get() + ".log"));
        int start = log.lastIndexOf("dtorch runtime server ");
        return start >= 0 && alive(serverPid()) && log.indexOf("prepared a context", start) > 0;
    }

    /** How many runs the servers of this class have served. */
    private static int servedRuns() {
        return (int) logs().lines().filter(line -> line.contains(" ran [")).count();
    }

    /** The pids of every set of standby workers {@code log} says the server prepared, in its order. */
    private static List<List<Long>> preparedSets(String log) {
        List<List<Long>> sets = new ArrayList<>();
        Matcher m = PREPARED.matcher(log);
        while (m.find()) {
            sets.add(pids(m.group(2)));
        }
        return sets;
    }

    /** The pids of the set the last run adopted. */
    private static List<Long> lastAdopted() {
        List<Long> last = List.of();
        Matcher m = ADOPTED.matcher(logs());
        while (m.find()) {
            last = pids(m.group(1));
        }
        return last;
    }

    private static List<Long> pids(String list) {
        return Pattern.compile(",\\s*").splitAsStream(list).map(Long::parseLong).toList();
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
