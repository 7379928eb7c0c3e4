package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.testing.Await;
import org.dtorch.ops.difftest.Campaign;
import org.dtorch.ops.difftest.Program;
import org.dtorch.ops.difftest.ProgramGenerator;
import org.dtorch.ops.difftest.ProgramRun;
import org.dtorch.ops.difftest.ProgramRun.Outcome;
import org.dtorch.ops.difftest.ProgramRun.Verdict;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Fault schedules of a client that closes the runtime mid-program: the client thread issues a random program of the
 * differential tests ({@link ProgramGenerator}) and then waits on its values, while a second thread calls
 * {@link DTorch#close()} once the client reached a step drawn from the schedule's seed (the last point being the wait
 * on the values); half the runtimes let close run what was queued (up to a shutdown timeout of 2 s), half cancel it at
 * once. Whatever the client was doing, it gets its values or an error saying that the runtime was closed
 * (never a wrong value, never the runtime's deadline, never a hang), {@code close()} returns, no worker thread is left,
 * nothing of the runtime is left in shared memory or in the rendezvous directory, and another runtime in the same JVM
 * runs every schedule's program to the values torch gives. The devices are worker threads here;
 * {@link ClientCloseSchedulesInProcessesTest} runs the same with worker processes.
 */
@Timeout(3600)
class ClientCloseSchedulesTest {
    /** The kernels' deadline. A close must end every wait well before it: a TIMEOUT verdict is a failure. */
    static final Duration TIMEOUT = Duration.ofSeconds(60);
    /** How long close waits for queued work before it cancels it; half the schedules draw {@link #CANCEL_AT_ONCE}. */
    static final Duration SHUTDOWN_TIMEOUT = Duration.ofSeconds(2);
    /** A shutdown timeout under which close cancels what is queued, so that the client's waits end with the cancel. */
    static final Duration CANCEL_AT_ONCE = Duration.ofMillis(1);

    boolean processes() {
        return false;
    }

    private DTorch start(Duration shutdownTimeout) {
        return DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(processes()).timeout(TIMEOUT)
            .shutdownTimeout(shutdownTimeout).build());
    }

    @Test
    void shouldEndTheClientWithTheValuesOrAClosedErrorAndLeaveNothingBehind() throws Exception {
        runSchedules(7_000_000, 5); // a runtime of worker threads starts in milliseconds: every build runs a few
    }

    @Test
    @Tag("slow")
    void shouldSurviveAHundredClientCloseSchedules() throws Exception {
        runSchedules(70_000_000, 100);
    }

    /**
     * A client's call that a close on another thread overtakes: the client passes the runtime's open check, the close
     * runs to its end, then the client's operator reaches the controller. The operator is refused; were it dropped, its
     * outputs would never be written and the promise of a value fetched that way would wait out the deadline.
     */
    @Test
    void shouldRefuseAnOperatorThatReachesTheControllerAfterAClose() throws Exception {
        DTorch dt = start(SHUTDOWN_TIMEOUT);
        CountDownLatch inferring = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        ExecutorService client = Executors.newSingleThreadExecutor(r -> Thread.ofPlatform().name("schedule-client").daemon().unstarted(r));
        try {
            DTensor x = dt.ones(new long[] {8}, dt.defaultMesh(), Placement.shard(0));
            Future<DTensor> added = client.submit(() -> dt.apply(new TestOps.HeldInference(inferring, closed, TIMEOUT), x));
            assertTrue(inferring.await(TIMEOUT.toSeconds(), TimeUnit.SECONDS), "the client reaches the inference");
            dt.close();
            closed.countDown();
            ExecutionException e = assertThrows(ExecutionException.class, () -> added.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS));
            IllegalStateException refused = assertInstanceOf(IllegalStateException.class, e.getCause());
            assertEquals("held: the runtime is closed", refused.getMessage());
        } finally {
            closed.countDown();
            client.shutdownNow();
            dt.close();
        }
    }

    /**
     * A close whose shutdown timeout ends before the controller has dispatched all the client queued (in processes the
     * controller is a thread of its own, which a 1 ms timeout overtakes): every future the client holds ends with its
     * value or with the close, none at the deadline. The runtime's deadline is short here, so that a future the close forgot fails the test soon.
     */
    @Test
    void shouldEndEveryFutureWhenTheCloseOvertakesTheController() {
        Duration deadline = Duration.ofSeconds(10);
        DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(processes()).timeout(deadline)
            .shutdownTimeout(CANCEL_AT_ONCE).build());
        List<TensorFuture> futures = new ArrayList<>();
        try {
            DTensor x = dt.ones(new long[] {8, 4}, dt.defaultMesh(), Placement.shard(0));
            for (int i = 0; i < 200; i++) {
                x = x.mul(1.0).redistribute(Placement.replicate()).redistribute(Placement.shard(0));
                futures.add(x.sum().toTorchAsync());
            }
        } finally {
            dt.close();
        }
        int cancelled = 0;
        for (TensorFuture f : futures) {
            try (Tensor value = f.get()) {
                assertEquals(32.0, value.item_double(), "a value computed before the close is right");
            } catch (FutureFailedException e) {
                assertEquals(FailureKind.CANCELLED, FailureKind.of(e), () -> "future " + futures.indexOf(f) + ": " + e.getMessage());
                assertTrue(e.getMessage().contains("the runtime was closed"), e.getMessage());
                cancelled++;
            }
        }
        System.out.println("close overtaking the controller: " + cancelled + " of " + futures.size() + " futures cancelled");
    }

    /** Runs {@code count} schedules from {@code firstSeed} (each overridable by Campaign's properties), then the check. */
    void runSchedules(long firstSeed, int count) throws Exception {
        long seed = Campaign.property(Campaign.SEED, firstSeed);
        int n = (int) Campaign.property(Campaign.COUNT, count);
        ProgramGenerator generator = new ProgramGenerator(4, (int) Campaign.property(Campaign.STEPS, Campaign.DEFAULT_STEPS));
        List<Program> programs = new ArrayList<>();
        Map<Verdict, Integer> verdicts = new java.util.EnumMap<>(Verdict.class);
        ExecutorService threads = Executors.newFixedThreadPool(2, r -> Thread.ofPlatform().name("schedule").daemon().unstarted(r));
        try {
            for (int i = 0; i < n; i++) {
                Program p = generator.generate(seed + i);
                verdicts.merge(closeDuring(p, threads), 1, Integer::sum);
                programs.add(p);
            }
        } finally {
            threads.shutdownNow();
        }
        System.out.println("client close schedules (" + (processes() ? "processes" : "threads") + "): " + n + " from seed " + seed
            + ": " + verdicts);
        // The closed runtimes leave this JVM able to run another, which runs the same programs whole. In processes that is
        // the shared runtime of the operator classes (started here if no class started it yet), which spares four JVMs:
        // each schedule's runtime already started after the previous one closed.
        DTorch after = processes() ? SharedWorkerProcesses.runtime() : start(SHUTDOWN_TIMEOUT);
        try {
            for (Program p : programs) {
                Outcome o = ProgramRun.run(after, p);
                assertFalse(o.failed(), () -> "after the closes, seed " + p.seed() + ": " + o);
            }
        } finally {
            SharedWorkerProcesses.closeUnlessShared(after);
        }
    }

    /**
     * Runs {@code p} on a new runtime from one thread while another closes the runtime once the first reached a drawn
     * step (the step count stands for the wait on the values), and checks what the client sees and what is left.
     */
    private Verdict closeDuring(Program p, ExecutorService threads) throws Exception {
        Random rnd = new Random(p.seed());
        int at = rnd.nextInt(p.steps().size() + 1);
        Duration shutdownTimeout = rnd.nextBoolean() ? SHUTDOWN_TIMEOUT : CANCEL_AT_ONCE;
        long started = System.nanoTime();
        DTorch dt = start(shutdownTimeout);
        String instance = dt.runtime().instanceId();
        Map<Long, Long> pids = dt.runtime().workerPids();
        String schedule = "seed " + p.seed() + ", closed at " + (at == p.steps().size() ? "the wait on the values" : "step " + at)
            + ", shutdown timeout " + shutdownTimeout.toMillis() + " ms\n" + p.describe();
        AtomicInteger reached = new AtomicInteger(-1);
        Outcome seen;
        try {
            Future<Outcome> client = threads.submit(() -> {
                try (ProgramRun run = new ProgramRun(dt, p)) {
                    Outcome ref = run.reference();
                    if (ref != null) {
                        return ref;
                    }
                    for (int i = 0; run.hasNext(); i++) {
                        reached.set(i);
                        Outcome o = run.issue();
                        if (o != null) {
                            return o;
                        }
                    }
                    reached.set(p.steps().size());
                    return run.finish();
                }
            });
            Future<?> closer = threads.submit(() -> {
                Await.until(() -> reached.get() >= at || client.isDone(), TIMEOUT, () -> schedule + ": the client reaches the drawn step");
                dt.close();
            });
            seen = outcome(client, schedule + ": the client ends");
            outcome(closer, schedule + ": close returns");
        } finally {
            dt.close(); // idempotent; the class's timeout stands for a close that hangs
        }
        long closedAfter = (System.nanoTime() - started) / 1_000_000;
        System.out.println("client close schedule " + schedule.lines().findFirst().orElse("") + ": " + seen + " (" + closedAfter + " ms)");
        assertNotEquals(Verdict.INVALID, seen.verdict(), () -> schedule + ": the generator draws programs libtorch runs");
        assertNotEquals(Verdict.MISMATCH, seen.verdict(), () -> schedule + ": a close gives an error, never a wrong value: " + seen);
        assertNotEquals(Verdict.TIMEOUT, seen.verdict(), () -> schedule + ": a close ends every wait, not the deadline: " + seen);
        if (seen.failed()) {
            assertTrue(seen.detail().contains("closed"), () -> schedule + ": the error says the runtime was closed: " + seen);
        }
        IllegalStateException refused = assertThrows(IllegalStateException.class,
            () -> dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0)).close());
        assertTrue(refused.getMessage().contains("closed"), () -> schedule + ": " + refused.getMessage());
        for (long pid : pids.values()) {
            Await.until(() -> !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), TIMEOUT,
                () -> schedule + ": worker " + pid + " ends with its runtime");
        }
        Await.until(() -> ShutdownTest.runtimeThreads().isEmpty(), TIMEOUT,
            () -> schedule + ": every runtime thread stops: " + ShutdownTest.runtimeThreads() + " run");
        assertEquals(List.of(), ProcessFaultsTest.filesOf(instance), () -> schedule + ": shared memory left behind");
        assertFalse(Files.exists(CommPaths.root().resolve(instance)), () -> schedule + ": rendezvous directory left behind");
        return seen.verdict();
    }

    /** The stacks of the schedule's threads and the runtime's, for the report of a hang. */
    private static String stacks() {
        StringBuilder out = new StringBuilder();
        Thread.getAllStackTraces().forEach((thread, frames) -> {
            if (thread.getName().startsWith("schedule") || thread.getName().startsWith("dtorch-")) {
                out.append(thread.getName()).append(" (").append(thread.getState()).append(")\n");
                for (StackTraceElement frame : frames) {
                    out.append("    at ").append(frame).append('\n');
                }
            }
        });
        return out.toString();
    }

    /**
     * {@code f}'s result within twice the runtime's deadline, or a failure naming what did not end: a wait that the
     * deadline ends comes back as a TIMEOUT verdict, which the schedule reports as such; only beyond it is a thread hung.
     */
    private static <T> T outcome(Future<T> f, String what) throws InterruptedException {
        try {
            return f.get(2 * TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            String stacks = stacks();
            f.cancel(true);
            return fail(what + " within " + TIMEOUT.multipliedBy(2) + " (a hang); the threads:\n" + stacks);
        } catch (ExecutionException e) {
            return fail(what + ": it threw", e.getCause());
        }
    }
}
