package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.dtorch.core.communication.group.GroupFixtures.rejected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * TeleFuser's shared collectives ({@code allGatherStacked}, {@code allGatherCat}, {@code allReduceSum_}) on three rank
 * threads of both backends, each rank's result compared exactly with torch's {@code stack}, {@code cat} and sums of the
 * full per-rank inputs on one device; bad input fails before any value moves and leaves the group usable.
 */
@Timeout(60)
class ThreadGroupSharedCollectivesTest {
    private static final int WORLD = 3;

    /** Rank {@code r}'s input of shape {@code shape}: small integers, exact in every dtype. */
    private static Tensor input(int r, ScalarType dtype, long... shape) {
        return TestTensors.pattern(shape, dtype, 5L * r, 11, r);
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldMatchTorchStackCatAndSum(Backend backend) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(WORLD,
                rank -> runSharedCollectives(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(WORLD), rank), Device.cpu(0)));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
            // Per rank and dtype: one stacked gather and three cats of two gathers each (the shapes, then the values).
            assertEquals(2L * 7 * WORLD, manager.collectiveCounter().count(CollectiveKind.ALL_GATHER));
            assertEquals(WORLD, manager.collectiveCounter().count(CollectiveKind.ALL_REDUCE));
        }
    }

    /**
     * Each shared collective on inputs on {@code device}, in float32 and int64, compared on the host with torch's
     * {@code stack}, {@code cat} and sums of every rank's input. The mismatches; every rank calls it, in threads or
     * processes.
     */
    static List<String> runSharedCollectives(ThreadGroup group, Device device) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        ThreadGroupCollectivesTest.Checker check = new ThreadGroupCollectivesTest.Checker(rank);
        for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.Long)) {
            List<Tensor> equal = GroupFixtures.perRank(world, r -> input((int) r, dtype, 2, 3));
            try (Tensor local = mine(equal, rank, device); Tensor expected = stack(equal);
                 Tensor actual = group.allGatherStacked(local)) {
                check.equal("allGatherStacked " + dtype, expected, actual, false);
                // Its own allocation, exactly its size (not a view of a bigger buffer). Use counts are not compared: Gloo's
                // thread drops its reference to a finished work's output a moment after the wait returns.
                try (org.bytedeco.pytorch.Storage storage = actual.storage()) {
                    check.that("allGatherStacked is one allocation of its own size", storage.nbytes() == actual.nbytes(),
                        storage.nbytes() + " bytes for " + actual.nbytes());
                }
            }
            // Uneven on dim 1, the rank order kept; dims 0 and -1 name the ends.
            List<Tensor> uneven = GroupFixtures.perRank(world, r -> input((int) r, dtype, 2, r + 1, 3));
            try (Tensor local = mine(uneven, rank, device); Tensor expected = ThreadGroupCollectivesTest.cat(uneven, 1);
                 Tensor actual = group.allGatherCat(local, 1)) {
                check.equal("allGatherCat(dim 1) uneven " + dtype, expected, actual, false);
            }
            List<Tensor> rows = GroupFixtures.perRank(world, r -> input((int) r, dtype, 2 * r + 1, 4));
            try (Tensor local = mine(rows, rank, device); Tensor expected = ThreadGroupCollectivesTest.cat(rows, 0);
                 Tensor actual = group.allGatherCat(local, 0)) {
                check.equal("allGatherCat(dim 0) uneven " + dtype, expected, actual, false);
            }
            try (Tensor local = mine(equal, rank, device); Tensor expected = ThreadGroupCollectivesTest.cat(equal, 1);
                 Tensor actual = group.allGatherCat(local, -1)) {
                check.equal("allGatherCat(dim -1) even " + dtype, expected, actual, false);
            }
            equal.forEach(Tensor::close);
            uneven.forEach(Tensor::close);
            rows.forEach(Tensor::close);
        }
        // Two independent sums in place, one of them into a non-contiguous view.
        List<Tensor> values = GroupFixtures.perRank(world, r -> input((int) r, ScalarType.Float, 4, 5));
        List<Tensor> weights = GroupFixtures.perRank(world, r -> input((int) r, ScalarType.Long, 3, 2));
        try (Tensor expectedValues = GroupFixtures.reference(values, ReduceOpType.SUM);
             Tensor expectedWeights = GroupFixtures.reference(weights, ReduceOpType.SUM);
             Tensor mine = mine(values, rank, device); Tensor transposed = on(device, weights.get(rank).t().contiguous());
             Tensor view = transposed.t()) {
            long address = mine.data_ptr().address();
            group.allReduceSum_(mine, view);
            check.that("allReduceSum_ in place", mine.data_ptr().address() == address, "the tensor was replaced");
            check.equal("allReduceSum_ values", expectedValues, mine, false);
            try (Tensor dense = view.contiguous()) {
                check.equal("allReduceSum_ non-contiguous weights", expectedWeights, dense, false);
            }
        }
        values.forEach(Tensor::close);
        weights.forEach(Tensor::close);
        return check.failures;
    }

    /** A copy of rank {@code rank}'s input on {@code device}, which the caller closes. */
    private static Tensor mine(List<Tensor> inputs, int rank, Device device) {
        return on(device, inputs.get(rank).clone());
    }

    private static Tensor on(Device device, Tensor t) {
        return ThreadGroupCollectivesTest.onDevice(t, device);
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldRejectDisagreeingOrBadInputBeforeMovingValues(Backend backend) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> messages = RankThreads.run(2, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank);
                List<String> seen = new ArrayList<>();
                try (Tensor x = input(rank, ScalarType.Float, 2, 3);
                     Tensor otherWidth = input(rank, ScalarType.Float, 2, 3 + rank);
                     Tensor otherType = input(rank, rank == 0 ? ScalarType.Float : ScalarType.Long, 2, 3)) {
                    seen.add(rejected(() -> group.allGatherCat(otherWidth, 0)));
                    seen.add(rejected(() -> group.allGatherCat(otherType, 1)));
                    seen.add(rejected(() -> group.allGatherCat(x, 2)));
                    seen.add(rejected(() -> group.allGatherStacked(null)));
                    seen.add(rejected(() -> group.allReduceSum_()));
                    seen.add(rejected(() -> group.allReduceSum_(x, x)));
                    // Nothing moved: the group still works.
                    try (Tensor gathered = group.allGatherCat(otherWidth, 1)) {
                        seen.add(gathered.size(1) == 7 ? "usable" : "unusable: " + TestTensors.values(gathered));
                    }
                }
                return seen;
            });
            for (List<String> seen : messages) {
                assertTrue(seen.get(0).contains("ranks disagree on everything but dim 0: rank 0 has float32[2, 3], rank 1 has float32[2, 4]"),
                    seen.get(0));
                assertTrue(seen.get(1).contains("rank 0 has float32[2, 3], rank 1 has int64[2, 3]"), seen.get(1));
                assertEquals("usable", seen.get(6));
            }
            List<String> rank1 = messages.get(1);
            assertTrue(rank1.get(0).startsWith("allGatherCat(dim 0) on group cpu[0, 1] (rank 1 of 2"), rank1.get(0));
            assertTrue(rank1.get(2).contains("cat dim 2 is out of range for input float32[2, 3] on cpu"), rank1.get(2));
            assertTrue(rank1.get(3).contains("input is null"), rank1.get(3));
            assertTrue(rank1.get(4).contains("allReduceSum_ on group cpu[0, 1] (rank 1 of 2"), rank1.get(4));
            assertTrue(rank1.get(4).contains("no tensors"), rank1.get(4));
            assertTrue(rank1.get(5).contains("tensors 0 and 1 share their data"), rank1.get(5));
        }
    }


    private static Tensor stack(List<Tensor> pieces) {
        try (TensorVector v = new TensorVector(pieces.toArray(Tensor[]::new)); TensorArrayRef ref = new TensorArrayRef(v)) {
            return torch.stack(ref, 0);
        }
    }
}
