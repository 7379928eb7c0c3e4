package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every collective with ranks that hold zero elements, as PyTorch's DTensor gives them when a dimension is shorter than
 * the ranks that split it: dimensions shorter than the group (2 over 4 is 1, 1, 0, 0), tensors with no element at all,
 * a large tensor whose shards go round Gloo's ring with an empty one among them, concatenations and point-to-point
 * messages of zero-size tensors. Each rank's result is compared with torch on the full tensor.
 */
@Timeout(180)
class ThreadGroupEmptyShardsTest {

    static Stream<Arguments> backendsAndWorlds() {
        List<Arguments> all = new ArrayList<>();
        for (GroupFixtures.Backend backend : GroupFixtures.Backend.values()) {
            for (int world : new int[] {2, 3, 4}) {
                all.add(Arguments.of(backend, world));
            }
        }
        return all.stream();
    }

    @ParameterizedTest(name = "{0} world={1}")
    @MethodSource("backendsAndWorlds")
    void shouldRunEveryCollectiveWithEmptyShards(GroupFixtures.Backend backend, int world) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(60))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(150),
                rank -> runWithEmptyShards(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank), Device.cpu(0)));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    @ParameterizedTest(name = "{0} world={1}")
    @MethodSource("backendsAndWorlds")
    void shouldSplitShortDimensionsWithTheLastRanksEmpty(GroupFixtures.Backend backend, int world) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(60))) {
            List<long[]> shapes = RankThreads.run(world, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank);
                try (Tensor full = TestTensors.pattern(new long[] {world - 1, 2}, ScalarType.Float, 0, 7, 0);
                     Tensor shard = group.replicateToShard(full, 0)) {
                    return TorchTensors.shape(shard);
                }
            });
            for (int rank = 0; rank < world; rank++) {
                assertArrayEquals(new long[] {rank < world - 1 ? 1 : 0, 2}, shapes.get(rank), "rank " + rank);
            }
        }
    }

    /**
     * The collectives of {@link ThreadGroupCollectivesTest#runEveryCollective} on shapes whose sharded dimensions are
     * shorter than the group or empty, in float32 and int64; then a float32 {@code [3, 1 << 19]} (6 MiB: Gloo's ring
     * takes its all-gather and reduce-scatter) whose dim 0 leaves the fourth rank empty; then concatenations, stacks,
     * in-place sums and point-to-point messages of zero-size tensors. Tensors on {@code device}; the mismatches. Every
     * rank calls it, in threads, processes or on nodes.
     */
    static List<String> runWithEmptyShards(ThreadGroup group, Device device) {
        int world = group.getWorldSize();
        List<String> failures = new ArrayList<>();
        for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.Long)) {
            // dim 0 shorter than the group, the last dim too; then no element anywhere.
            failures.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, dtype, new long[] {world - 1, 2, world - 1}, device));
            failures.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, dtype, new long[] {0, world + 1}, device));
            failures.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, dtype, new long[] {1, 0}, device));
        }
        failures.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, ScalarType.Float, new long[] {3, 1 << 19}, device));
        failures.addAll(zeroSizeSharedCollectives(group, device));
        group.barrier();
        return failures;
    }

    /**
     * allGatherCat with some ranks contributing nothing, allGatherStacked and allReduceSum_ of zero-size tensors, and (with
     * two ranks or more) send/recv of them.
     */
    private static List<String> zeroSizeSharedCollectives(ThreadGroup group, Device device) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        ThreadGroupCollectivesTest.Checker check = new ThreadGroupCollectivesTest.Checker(rank);
        // Even ranks contribute no row.
        List<Tensor> rows = GroupFixtures.perRank(world, r -> TestTensors.pattern(new long[] {r % 2 == 0 ? 0 : r, 3}, ScalarType.Float, r, 11, 0));
        try (Tensor local = on(device, rows.get(rank).clone()); Tensor expected = ThreadGroupCollectivesTest.cat(rows, 0);
             Tensor actual = group.allGatherCat(local, 0)) {
            check.equal("allGatherCat with empty pieces", expected, actual, false);
        }
        List<Tensor> nothing = GroupFixtures.perRank(world, r -> TestTensors.pattern(new long[] {0, 3}, ScalarType.Long, 0, 1, 0));
        try (Tensor local = on(device, nothing.get(rank).clone()); Tensor actual = group.allGatherStacked(local)) {
            check.that("allGatherStacked of empty tensors", java.util.Arrays.equals(TorchTensors.shape(actual), new long[] {world, 0, 3}),
                TorchTensors.describe(actual));
        }
        try (Tensor local = on(device, nothing.get(rank).clone()); Tensor actual = group.allGatherCat(local, 1)) {
            check.that("allGatherCat of empty tensors", java.util.Arrays.equals(TorchTensors.shape(actual), new long[] {0, 3 * world}),
                TorchTensors.describe(actual));
        }
        List<Tensor> values = GroupFixtures.perRank(world, r -> TestTensors.pattern(new long[] {2, 3}, ScalarType.Float, r, 5, 1));
        try (Tensor empty = on(device, nothing.get(rank).clone()); Tensor mine = on(device, values.get(rank).clone());
             Tensor expected = GroupFixtures.reference(values, ReduceOpType.SUM)) {
            group.allReduceSum_(empty, mine);
            check.equal("allReduceSum_ beside an empty tensor", expected, mine, false);
            check.that("allReduceSum_ of an empty tensor", empty.numel() == 0, TorchTensors.describe(empty));
        }
        int right = (rank + 1) % world;
        int left = (rank + world - 1) % world;
        if (world == 1) { // a rank alone has no peer to send to
            rows.forEach(Tensor::close);
            nothing.forEach(Tensor::close);
            values.forEach(Tensor::close);
            return check.failures;
        }
        try (Tensor out = on(device, nothing.get(rank).clone()); Tensor in = on(device, nothing.get(rank).clone());
             Tensor words = on(device, TestTensors.pattern(new long[] {4}, ScalarType.Float, rank, 9, 0));
             Tensor heard = on(device, TestTensors.full(-1f, 4)); Tensor expectedWords = TestTensors.pattern(new long[] {4}, ScalarType.Float, left, 9, 0)) {
            P2PWork work = group.batchIsendIrecv(List.of(P2POp.irecv(in, left), P2POp.isend(out, right), P2POp.irecv(heard, left),
                P2POp.isend(words, right)));
            work.await();
            check.equal("a message after an empty one", expectedWords, heard, false);
        }
        rows.forEach(Tensor::close);
        nothing.forEach(Tensor::close);
        values.forEach(Tensor::close);
        return check.failures;
    }

    private static Tensor on(Device device, Tensor t) {
        return ThreadGroupCollectivesTest.onDevice(t, device);
    }
}
