package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.dtorch.api.DTorch;
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
 * Fault schedules across nodes: a random program of the differential tests ({@link ProgramGenerator}) runs on two nodes
 * of two CPU devices on loopback ({@link TwoNodes}; node 0 is this JVM, the controller), and node 1's agent JVM is
 * killed ({@code SIGKILL}, which ends its two worker JVMs with it) before an operator drawn from the schedule's seed is
 * issued, while the operators before it may still run. Whatever the program was doing, the client gets an error naming
 * node 1 or one of its devices (never a wrong value, never the runtime's deadline), the runtime refuses new work naming
 * node 1, closing it does not hang and ends every worker of both nodes, nothing of the run is left in shared memory or
 * in the rendezvous directory, and a new two-node run in the same JVM runs every schedule's program to the values torch
 * gives. Starting two nodes costs several seconds, more than every build may spend: the schedules run in the slow run.
 */
@Tag("multinode")
@Tag("slow")
@Timeout(3600)
class FaultSchedulesAcrossNodesTest {
    /** The kernels' deadline. A death must be noticed well before it: a TIMEOUT verdict is a failure. */
    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    /** How node 1 and its devices appear in errors. */
    private static final List<String> NAMES_OF_NODE_1 = List.of("node 1", "cpu:2", "cpu:3");

    @Test
    void shouldReportTheKilledNodeAndLeaveNothingBehindForRandomPrograms() throws Exception {
        // Twenty fit the CI's slow run (each schedule starts two nodes, five JVMs); -Ddtorch.difftest.count=200 runs more.
        runSchedules(90_000_000, 20);
    }

    private static void runSchedules(long firstSeed, int count) throws Exception {
        long seed = Campaign.property(Campaign.SEED, firstSeed);
        int n = (int) Campaign.property(Campaign.COUNT, count);
        ProgramGenerator generator = new ProgramGenerator(4, (int) Campaign.property(Campaign.STEPS, Campaign.DEFAULT_STEPS));
        List<Program> programs = new ArrayList<>();
        Map<Verdict, Integer> verdicts = new EnumMap<>(Verdict.class);
        long started = System.nanoTime();
        for (int i = 0; i < n; i++) {
            Program p = generator.generate(seed + i);
            verdicts.merge(killDuring(p), 1, Integer::sum);
            programs.add(p);
        }
        System.out.println("node fault schedules: " + n + " from seed " + seed + " in " + (System.nanoTime() - started) / 1_000_000
            + " ms: " + verdicts);
        // The runs that lost a node leave this JVM able to start another, which runs the same programs whole.
        try (TwoNodes.Run run = TwoNodes.start(2, 2, TIMEOUT)) {
            for (Program p : programs) {
                Outcome o = ProgramRun.run(run.dt(), p);
                assertFalse(o.failed(), () -> "after the faults, seed " + p.seed() + ": " + o);
            }
        }
    }

    /** Runs {@code p} on a new two-node run, killing node 1's agent before a drawn step, and checks what the client sees. */
    private static Verdict killDuring(Program p) throws Exception {
        Random rnd = new Random(p.seed());
        int at = rnd.nextInt(p.steps().size());
        long started = System.nanoTime();
        TwoNodes.Run run = TwoNodes.start(2, 2, TIMEOUT);
        DTorch dt = run.dt();
        Process agent = run.agents().getFirst();
        String instance = dt.runtime().instanceId();
        Map<Long, Long> pids = dt.runtime().workerPids();
        String schedule = "seed " + p.seed() + ", node 1's agent killed before step " + at + "\n" + p.describe();
        Outcome seen;
        try {
            try (ProgramRun program = new ProgramRun(dt, p)) {
                Outcome ref = program.reference();
                assertEquals(null, ref, () -> schedule + ": the generator draws programs libtorch runs");
                Outcome o = null;
                for (int i = 0; o == null && program.hasNext(); i++) {
                    if (i == at) {
                        agent.destroyForcibly();
                    }
                    o = program.issue();
                }
                seen = o != null ? o : program.finish();
            }
            System.out.println("node fault schedule " + schedule.lines().findFirst().orElse("") + ": " + seen + " ("
                + (System.nanoTime() - started) / 1_000_000 + " ms)");
            assertNotEquals(Verdict.MISMATCH, seen.verdict(), () -> schedule + ": a lost node gives an error, never a wrong value: " + seen);
            assertNotEquals(Verdict.TIMEOUT, seen.verdict(), () -> schedule + ": the death must be noticed, not left to the deadline: " + seen);
            if (seen.failed()) {
                assertTrue(NAMES_OF_NODE_1.stream().anyMatch(seen.detail()::contains), () -> schedule + ": the error names node 1: " + seen);
            }
            // Whether or not the program still needed node 1, the runtime notices the death and refuses new work, naming it.
            Await.until(() -> dt.runtime().brokenBy() != null, TIMEOUT, () -> schedule + ": the runtime notices the death of node 1");
            IllegalStateException refused = assertThrows(IllegalStateException.class,
                () -> dt.ones(new long[] {4}, dt.defaultMesh(), Placement.shard(0)).close());
            assertTrue(refused.getMessage().contains("node 1"), () -> schedule + ": " + refused.getMessage());
        } finally {
            agent.destroyForcibly();
            dt.close(); // the class's timeout stands for a close that hangs
        }
        Await.until(() -> !agent.isAlive(), TIMEOUT, () -> schedule + ": node 1's agent ends");
        for (long pid : pids.values()) {
            Await.until(() -> !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), TIMEOUT,
                () -> schedule + ": worker " + pid + " of either node ends with the run");
        }
        assertEquals(List.of(), TwoNodes.sharedMemoryOf(instance), () -> schedule + ": shared memory left behind");
        assertFalse(Files.exists(CommPaths.root().resolve(instance)), () -> schedule + ": rendezvous directory left behind");
        return seen.verdict();
    }
}
