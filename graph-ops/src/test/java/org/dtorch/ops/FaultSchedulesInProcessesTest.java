package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.CommPaths;
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
 * Fault schedules: a random program of the differential tests ({@link ProgramGenerator}) runs with every device a worker
 * process, and one worker JVM, drawn from the schedule's seed, is killed ({@code SIGKILL}) before a drawn operator is
 * issued, while the operators before it may still run. Whatever the program was doing, the client gets an error naming
 * the killed device (never a wrong value, never the runtime's deadline), closing the runtime does not hang and ends every
 * worker, nothing of the runtime is left in shared memory or in the rendezvous directory, and a new runtime in the same
 * JVM runs every schedule's program to the values torch gives. Every build runs a few schedules; the slow run more.
 */
@Tag("multiprocess")
@Timeout(1800)
class FaultSchedulesInProcessesTest {
    /** The kernels' deadline. A death must be noticed well before it: a TIMEOUT verdict is a failure. */
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private static DTorch start() {
        return DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).timeout(TIMEOUT)
            .shutdownTimeout(Duration.ofSeconds(2)).build());
    }

    @Test
    void shouldReportTheKilledWorkerAndLeaveNothingBehindForRandomPrograms() throws Exception {
        runSchedules(6_000_000, 1); // each schedule starts four worker JVMs: the slow run takes the many
    }

    @Test
    @Tag("slow")
    void shouldSurviveAHundredFaultSchedules() throws Exception {
        // A hundred fit the CI's slow run (each starts four worker JVMs); -Ddtorch.difftest.count=200 runs more.
        runSchedules(60_000_000, 100);
    }

    private static void runSchedules(long firstSeed, int count) throws Exception {
        long seed = Campaign.property(Campaign.SEED, firstSeed);
        int n = (int) Campaign.property(Campaign.COUNT, count);
        ProgramGenerator generator = new ProgramGenerator(4, (int) Campaign.property(Campaign.STEPS, Campaign.DEFAULT_STEPS));
        List<Program> programs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Program p = generator.generate(seed + i);
            killDuring(p);
            programs.add(p);
        }
        // The runtimes that lost a worker leave this JVM able to start another, which runs the same programs whole.
        try (DTorch dt = start()) {
            for (Program p : programs) {
                Outcome o = ProgramRun.run(dt, p);
                assertFalse(o.failed(), () -> "after the faults, seed " + p.seed() + ": " + o);
            }
        }
    }

    /** Runs {@code p} on a new runtime, killing a drawn worker before a drawn step, and checks what the client sees. */
    private static void killDuring(Program p) throws Exception {
        Random rnd = new Random(p.seed());
        int at = rnd.nextInt(p.steps().size());
        DTorch dt = start();
        String instance = dt.runtime().instanceId();
        Map<Long, Long> pids = dt.runtime().workerPids();
        long device = rnd.nextInt(pids.size());
        long victim = pids.get(device);
        String named = "cpu:" + device;
        String schedule = "seed " + p.seed() + ", worker " + named + " killed before step " + at + "\n" + p.describe();
        Outcome outcome;
        try {
            try (ProgramRun run = new ProgramRun(dt, p)) {
                Outcome ref = run.reference();
                assertEquals(null, ref, () -> schedule + ": the generator draws programs libtorch runs");
                Outcome o = null;
                for (int i = 0; o == null && run.hasNext(); i++) {
                    if (i == at) {
                        assertTrue(ProcessHandle.of(victim).orElseThrow().destroyForcibly(), schedule);
                    }
                    o = run.issue();
                }
                outcome = o != null ? o : run.finish();
            }
            Outcome seen = outcome;
            System.out.println("fault schedule " + schedule.lines().findFirst().orElse("") + ": " + seen);
            assertNotEquals(Verdict.MISMATCH, seen.verdict(), () -> schedule + ": a lost worker gives an error, never a wrong value: " + seen);
            assertNotEquals(Verdict.TIMEOUT, seen.verdict(), () -> schedule + ": the death must be noticed, not left to the deadline: " + seen);
            if (seen.failed()) {
                assertTrue(seen.detail().contains(named), () -> schedule + ": the error names the killed device: " + seen);
            }
            // Whether or not the program still needed the device, the runtime notices the death and refuses new work, naming it.
            Await.until(() -> dt.runtime().brokenBy() != null, TIMEOUT, () -> schedule + ": the runtime notices the death of " + named);
            IllegalStateException refused = assertThrows(IllegalStateException.class,
                () -> dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0)).close());
            assertTrue(refused.getMessage().contains(named), () -> schedule + ": " + refused.getMessage());
        } finally {
            dt.close(); // the class's timeout stands for a close that hangs
        }
        for (long pid : pids.values()) {
            Await.until(() -> !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), TIMEOUT,
                () -> schedule + ": worker " + pid + " ends with its runtime");
        }
        assertEquals(List.of(), ProcessFaultsTest.filesOf(instance), () -> schedule + ": shared memory left behind");
        assertFalse(Files.exists(CommPaths.root().resolve(instance)), () -> schedule + ": rendezvous directory left behind");
    }
}
