package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.process.StandbyWorkers;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Per-device-process runtimes of a process that keeps worker JVMs on standby ({@link StandbyWorkers}, as the warm
 * runtime server does): a runtime adopts a set prepared for its configuration, each set serves one runtime and ends
 * with it, a runtime of another configuration starts its own workers, and unused standby workers end with their reserve.
 * Every runtime's result is compared with the same computation in single-device torch. Starts about a dozen worker JVMs.
 */
@Tag("multiprocess")
@Tag("slow")
@Timeout(900)
class StandbyWorkersInProcessesTest {
    private static final Duration WAIT = Duration.ofSeconds(300);
    private static final Pattern PREPARED = Pattern.compile("prepared \\d+ standby workers, pids \\[([0-9, ]+)\\]");

    private final List<String> log = new CopyOnWriteArrayList<>();
    private StandbyWorkers reserve;

    @BeforeEach
    void openReserve() {
        reserve = StandbyWorkers.open(Duration.ofSeconds(600), log::add);
        StandbyWorkers.install(reserve);
    }

    @AfterEach
    void closeReserve() {
        StandbyWorkers.install(null);
        reserve.close();
    }

    @Test
    void shouldAdoptEachPreparedSetForOneRuntimeOnly() {
        runAndCheck(2); // nothing prepared yet: this runtime launches its workers and names the configuration
        reserve.replenish();
        List<Long> first = awaitPrepared(1);
        assertEquals(new HashSet<>(first), runAndCheck(2), "the second runtime's workers are not the prepared ones");
        awaitEnded(first, "the adopted workers to end with their runtime");
        reserve.replenish();
        List<Long> second = awaitPrepared(2);
        assertTrue(Collections.disjoint(first, second), "a prepared set reuses a worker of an earlier run: " + first + " " + second);
        assertEquals(new HashSet<>(second), runAndCheck(2), "the third runtime's workers are not the prepared ones");
        awaitEnded(second, "the adopted workers to end with their runtime");
    }

    @Test
    void shouldStartItsOwnWorkersForAnotherDeviceCount() {
        runAndCheck(2);
        reserve.replenish();
        List<Long> prepared = awaitPrepared(1);
        Set<Long> three = runAndCheck(3);
        assertEquals(3, three.size());
        assertTrue(Collections.disjoint(prepared, three), "a runtime of 3 devices adopted workers made for 2: " + prepared + " " + three);
        awaitEnded(prepared, "the standby workers made for 2 devices to end");
        reserve.replenish();
        List<Long> next = awaitPrepared(2);
        assertEquals(3, next.size(), "the next set is not made for the last runtime's configuration: " + log);
        assertEquals(new HashSet<>(next), runAndCheck(3));
    }

    @Test
    void shouldEndUnusedStandbyWorkersWithTheReserve() {
        runAndCheck(1);
        reserve.replenish();
        List<Long> prepared = awaitPrepared(1);
        reserve.close();
        awaitEnded(prepared, "the unused standby workers to end with their reserve");
        runAndCheck(1); // no reserve installed any more: a fresh start, as without one
    }

    /** A per-device-process runtime of {@code devices} devices computes a sharded sum as torch does; its worker pids. */
    private static Set<Long> runAndCheck(int devices) {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(devices).perDevicePerProcess(true).timeout(WAIT).build())) {
            DTensor a = dt.arange(0, 10, 1, torch.ScalarType.Float, dt.defaultMesh(), Placement.shard(0));
            DTensor b = dt.full(3, new long[] {10}, dt.defaultMesh(), Placement.shard(0));
            try (Tensor got = a.mul(b).sum().toTorch();
                 Tensor x = torch.arange(new org.bytedeco.pytorch.Scalar(10)).to(torch.ScalarType.Float);
                 Tensor expected = x.mul(new org.bytedeco.pytorch.Scalar(3.0)).sum()) {
                assertEquals(expected.item_double(), got.item_double(), "the sum over " + devices + " worker processes");
            }
            return new HashSet<>(dt.runtime().workerPids().values());
        }
    }

    /** The pids of the {@code nth} set the reserve prepared, once its log says so. */
    private List<Long> awaitPrepared(int nth) {
        Await.until(() -> prepared().size() >= nth || log.stream().anyMatch(l -> l.startsWith("could not prepare")), WAIT,
            () -> "standby set " + nth + "; the reserve's log: " + log);
        assertTrue(prepared().size() >= nth, "the reserve could not prepare its workers: " + log);
        return prepared().get(nth - 1);
    }

    private List<List<Long>> prepared() {
        List<List<Long>> sets = new ArrayList<>();
        for (String line : log) {
            Matcher m = PREPARED.matcher(line);
            if (m.find()) {
                sets.add(Pattern.compile(",\\s*").splitAsStream(m.group(1)).map(Long::parseLong).toList());
            }
        }
        return sets;
    }

    private static void awaitEnded(List<Long> pids, String what) {
        Await.until(() -> pids.stream().noneMatch(pid -> ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)), WAIT,
            () -> what + ": pids " + pids);
    }
}
