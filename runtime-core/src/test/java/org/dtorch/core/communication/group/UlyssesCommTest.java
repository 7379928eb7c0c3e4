package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.ParallelConfig;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Ulysses' all-to-alls on real rank threads over Gloo and the same-device backend, each rank's result compared
 * exactly with torch's slice of the full tensor: scattering heads gives the whole sequence and this rank's heads,
 * gathering them back gives the input; the Ulysses groups of a {@link ParallelConfig} run side by side.
 */
class UlyssesCommTest {
    private static final long BATCH = 2;
    private static final long HEAD_DIM = 3;

    @ParameterizedTest(name = "{0} world={1}")
    @CsvSource({"GLOO, 2", "GLOO, 4", "SAME_DEVICE, 2", "SAME_DEVICE, 4", "GLOO, 1"})
    void shouldScatterHeadsAndGatherThemBack(Backend backend, int world) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(30))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(60),
                rank -> scatterAndGatherMatch(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank), Device.cpu(0)));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    /**
     * One rank's Ulysses exchanges on {@code device} (2 heads and 2 sequence rows per rank): scatter equals the heads
     * slice of the whole sequence, gather of the scatter is the input, the packed Q/K/V equal each one's reshuffle.
     */
    static List<String> scatterAndGatherMatch(ThreadGroup group, Device device) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        long[] shape = {BATCH, 2L * world, 2L * world, HEAD_DIM};
        UlyssesComm comm = new UlyssesComm(group);
        List<String> failed = new ArrayList<>();
        try (Tensor q = TestTensors.pattern(shape, ScalarType.Float, 0, 97, 0);
             Tensor k = TestTensors.pattern(shape, ScalarType.Float, 5, 89, 1);
             Tensor v = TestTensors.pattern(shape, ScalarType.Float, 11, 83, 2);
             Tensor localQ = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(q, 1, world, rank), device);
             Tensor localK = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(k, 1, world, rank), device);
             Tensor localV = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(v, 1, world, rank), device);
             Tensor expectedQ = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(q, 2, world, rank), device);
             Tensor expectedK = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(k, 2, world, rank), device);
             Tensor expectedV = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(v, 2, world, rank), device);
             Tensor scattered = comm.ulyssesScatterHeads(localQ);
             Tensor back = comm.ulyssesGatherHeads(scattered);
             UlyssesComm.HeadShards qkv = comm.scatterHeads(localQ, localK, localV)) {
            expectSame(failed, "ulyssesScatterHeads(q)", expectedQ, scattered);
            expectSame(failed, "ulyssesGatherHeads(scattered q)", localQ, back);
            expectSame(failed, "scatterHeads q", expectedQ, qkv.q());
            expectSame(failed, "scatterHeads k", expectedK, qkv.k());
            expectSame(failed, "scatterHeads v", expectedV, qkv.v());
        }
        return failed;
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"GLOO", "SAME_DEVICE"})
    void shouldRunInEveryUlyssesGroupOfAParallelConfigAtOnce(Backend backend) {
        ParallelConfig config = new ParallelConfig(1, 1, 2, 2, 1, 1);
        long[] shape = {BATCH, 4, 4, HEAD_DIM};
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(30))) {
            List<List<String>> failures = RankThreads.run(config.worldSize(), Duration.ofSeconds(60), rank -> {
                List<Long> ulysses = config.ulyssesGroup(rank);
                int groupRank = ulysses.indexOf((long) rank);
                UlyssesComm comm = new UlyssesComm(manager.getThreadGroup(DeviceKind.CPU, ulysses, rank));
                List<String> failed = new ArrayList<>();
                // Each Ulysses group (one per ring position) holds a sequence of its own.
                try (Tensor full = TestTensors.pattern(shape, ScalarType.Float, 7 * ulysses.getFirst(), 101, 0);
                     Tensor local = ThreadGroupCollectivesTest.shardOf(full, 1, ulysses.size(), groupRank);
                     Tensor expected = ThreadGroupCollectivesTest.shardOf(full, 2, ulysses.size(), groupRank);
                     Tensor scattered = comm.ulyssesScatterHeads(local);
                     Tensor back = comm.ulyssesGatherHeads(scattered)) {
                    expectSame(failed, "rank " + rank + " in " + ulysses + ": ulyssesScatterHeads", expected, scattered);
                    expectSame(failed, "rank " + rank + " in " + ulysses + ": ulyssesGatherHeads", local, back);
                }
                return failed;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"GLOO", "SAME_DEVICE"})
    void shouldRefuseIndivisibleHeadsAndSequencesBeforeCommunicating(Backend backend) {
        int world = 2;
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(30))) {
            RankThreads.runAll(world, rank -> {
                UlyssesComm comm = new UlyssesComm(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank));
                try (Tensor threeHeads = TestTensors.full(1f, 1, 2, 3, 4); Tensor oddSequence = TestTensors.full(1f, 1, 3, 2, 4);
                     Tensor flat = TestTensors.full(1f, 2, 4); Tensor other = TestTensors.full(1f, 1, 2, 4, 4);
                     Tensor even = TestTensors.full(1f, 1, 2, 2, 4)) {
                    assertEquals("UlyssesComm.ulyssesScatterHeads (rank " + rank + " of 2): the heads (3, dim 2 of [1, 2, 3, 4]) must be"
                        + " divisible by the Ulysses group size 2",
                        assertThrows(IllegalArgumentException.class, () -> comm.ulyssesScatterHeads(threeHeads)).getMessage());
                    assertTrue(assertThrows(IllegalArgumentException.class, () -> comm.ulyssesGatherHeads(oddSequence)).getMessage()
                        .contains("the gathered sequence length (3, dim 1 of [1, 3, 2, 4]) must be divisible"));
                    assertTrue(assertThrows(IllegalArgumentException.class, () -> comm.ulyssesScatterHeads(flat)).getMessage()
                        .contains("input must be [B, S, H, D]"));
                    assertTrue(assertThrows(IllegalArgumentException.class, () -> comm.scatterHeads(even, other, even)).getMessage()
                        .contains("q, k and v need equal shapes and dtypes"));
                    // Nothing was sent, so the group still works.
                    try (Tensor scattered = comm.ulyssesScatterHeads(even)) {
                        assertEquals(4, scattered.size(1));
                    }
                }
            });
        }
    }

    private static void expectSame(List<String> failed, String what, Tensor expected, Tensor actual) {
        if (!TestTensors.same(expected, actual)) {
            failed.add(what + ": " + TestTensors.diff(expected, actual));
        }
    }
}
