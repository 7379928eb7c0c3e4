package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every collective on both backends, world sizes 1 to 4, even and uneven shapes, float32, bfloat16 and
 * int64, each rank's result compared with torch on the full tensor. Values are small integers, so every
 * result is exact in every dtype and compared exactly (AVG of floats with a tolerance).
 */
class ThreadGroupCollectivesTest {
    private static final Map<Backend, Map<Integer, ThreadGroupManager>> MANAGERS = new EnumMap<>(Backend.class);

    static Stream<Arguments> configurations() {
        List<Arguments> all = new ArrayList<>();
        for (Backend backend : Backend.values()) {
            for (int world = 1; world <= 4; world++) {
                for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Long)) {
                    all.add(Arguments.of(backend, world, dtype, "even", new long[] {2L * world, 2L * world}));
                    all.add(Arguments.of(backend, world, dtype, "uneven", new long[] {2L * world + 1, world + 1}));
                    all.add(Arguments.of(backend, world, dtype, "uneven-3d", new long[] {world + 1, 2, world + 2}));
                }
            }
        }
        return all.stream();
    }

    private static synchronized ThreadGroupManager manager(Backend backend, int world) {
        return MANAGERS.computeIfAbsent(backend, b -> new HashMap<>())
            .computeIfAbsent(world, w -> GroupFixtures.manager(backend, Duration.ofSeconds(30)));
    }

    @AfterAll
    static void closeManagers() {
        MANAGERS.values().forEach(byWorld -> byWorld.values().forEach(ThreadGroupManager::close));
    }

    @ParameterizedTest(name = "{0} world={1} {2} {3}")
    @MethodSource("configurations")
    void shouldMatchTorchOnTheFullTensor(Backend backend, int world, ScalarType dtype, String shapeName, long[] shape) {
        ThreadGroupManager manager = manager(backend, world);
        List<Long> ids = GroupFixtures.ids(world);
        List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(90),
            rank -> runEveryCollective(manager.getThreadGroup(DeviceKind.CPU, ids, rank), dtype, shape));

        List<String> all = failures.stream().flatMap(List::stream).toList();
        assertEquals(List.of(), all, backend + " world " + world + " " + TorchTensors.dtypeName(dtype) + " " + Arrays.toString(shape));
    }

    /**
     * MAX and MIN keep NaN wherever one rank holds it, as torch's amax and amin do (Gloo's reductions alone keep a
     * number), in all-reduce and reduce-scatter: rank 1's NaN at position 1 and rank 2's at position 4 of six.
     */
    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldPropagateNaNThroughMaxAndMin(Backend backend) {
        ThreadGroupManager manager = manager(backend, 3);
        List<Long> ids = GroupFixtures.ids(3);
        List<List<String>> failures = RankThreads.run(3, Duration.ofSeconds(90), rank -> {
            ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, ids, rank);
            double[] values = {rank, rank, -rank, 2, 5, -1};
            if (rank == 1) {
                values[1] = Double.NaN;
            }
            if (rank == 2) {
                values[4] = Double.NaN;
            }
            List<String> wrong = new ArrayList<>();
            try (Tensor x = floats(values)) {
                for (ReduceOpType op : List.of(ReduceOpType.MAX, ReduceOpType.MIN)) {
                    try (Tensor all = group.allReduce(x, op); Tensor part = group.reduceScatterTensor(x, op)) {
                        double[] got = doubles(all);
                        double[] mine = doubles(part);
                        double[] want = {op == ReduceOpType.MAX ? 2 : 0, Double.NaN, op == ReduceOpType.MAX ? 0 : -2, 2, Double.NaN, -1};
                        if (!Arrays.equals(want, got)) {
                            wrong.add(backend + " rank " + rank + " allReduce(" + op + "): " + Arrays.toString(got));
                        }
                        if (!Arrays.equals(Arrays.copyOfRange(want, 2 * rank, 2 * rank + 2), mine)) {
                            wrong.add(backend + " rank " + rank + " reduceScatter(" + op + "): " + Arrays.toString(mine));
                        }
                    }
                }
            }
            return wrong;
        });
        assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
    }

    private static Tensor floats(double... values) {
        Tensor t;
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, Device.cpu(0))) {
            t = torch.zeros(new long[] {values.length}, options);
        }
        for (int i = 0; i < values.length; i++) {
            try (Tensor element = t.select(0, i); Scalar value = new Scalar(values[i])) {
                element.fill_(value);
            }
        }
        return t;
    }

    private static double[] doubles(Tensor t) {
        double[] out = new double[(int) t.numel()];
        for (int i = 0; i < out.length; i++) {
            try (Tensor element = t.select(0, i)) {
                out[i] = element.item_double();
            }
        }
        return out;
    }

    /**
     * Runs every collective of {@code group} on deterministic inputs and compares each result with torch on
     * the full tensors; the mismatches, empty when all match. Every rank calls it, in threads or processes.
     */
    static List<String> runEveryCollective(ThreadGroup group, ScalarType dtype, long[] shape) {
        return runEveryCollective(group, dtype, shape, Device.cpu(0));
    }

    /**
     * {@link #runEveryCollective(ThreadGroup, ScalarType, long[])} with the inputs, and so the results, on
     * {@code device}; results are compared on the host.
     */
    static List<String> runEveryCollective(ThreadGroup group, ScalarType dtype, long[] shape, Device device) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        int last = shape.length - 1;
        Tensor full = onDevice(TestTensors.pattern(shape, dtype, 0, 37, 0), device);
        List<Tensor> partials = GroupFixtures.perRank(world, r -> onDevice(TestTensors.pattern(shape, dtype, 5 * r, 3, 1), device));
        List<Tensor> equalShaped = GroupFixtures.perRank(world,
            r -> onDevice(TestTensors.pattern(new long[] {2, shape[last]}, dtype, 7 * r, 37, 0), device));
        List<ReduceOpType> ops = new ArrayList<>(List.of(ReduceOpType.SUM, ReduceOpType.MAX, ReduceOpType.MIN, ReduceOpType.PRODUCT));
        if (dtype != ScalarType.Long) {
            ops.add(ReduceOpType.AVG);
        }
        Checker check = new Checker(rank);
        Tensor mine = partials.get(rank);
        try (Tensor before = mine.clone()) {
            for (ReduceOpType op : ops) {
                try (Tensor expected = GroupFixtures.reference(partials, op); Tensor actual = group.allReduce(mine, op)) {
                    check.equal("allReduce(" + op + ")", expected, actual, op == ReduceOpType.AVG);
                }
            }
            check.equal("allReduce leaves its input alone", before, mine, false);
        }
        try (Tensor expected = cat(equalShaped, 0); Tensor actual = group.equalShapeAllGatherIntoTensor(equalShaped.get(rank))) {
            check.equal("equalShapeAllGatherIntoTensor", expected, actual, false);
        }
        try (Tensor shard = shardOf(full, 0, world, rank); Tensor actual = group.allGatherIntoTensor(shard, shape[0])) {
            check.equal("allGatherIntoTensor", full, actual, false);
        }
        try (Tensor shard = shardOf(full, last, world, rank); Tensor actual = group.allGather(shard, last, shape[last])) {
            check.equal("allGather(dim " + last + ")", full, actual, false);
        }
        try (Tensor shard = shardOf(full, last, world, rank)) {
            List<Tensor> pieces = group.allGatherIntoVec(shard, last, shape[last]);
            check.that("allGatherIntoVec size", pieces.size() == world, "got " + pieces.size() + " pieces");
            for (int r = 0; r < pieces.size(); r++) {
                try (Tensor expected = shardOf(full, last, world, r); Tensor piece = pieces.get(r)) {
                    check.equal("allGatherIntoVec piece " + r, expected, piece, false);
                }
            }
        }
        for (ReduceOpType op : List.of(ReduceOpType.SUM, ReduceOpType.MAX)) {
            try (Tensor reduced = GroupFixtures.reference(partials, op); Tensor expected = shardOf(reduced, 0, world, rank);
                 Tensor actual = group.reduceScatterTensor(mine, op)) {
                check.equal("reduceScatterTensor(" + op + ")", expected, actual, false);
            }
        }
        try (Tensor reduced = GroupFixtures.reference(partials, ReduceOpType.SUM); Tensor expected = shardOf(reduced, last, world, rank);
             Tensor actual = group.reduceScatterTensor(mine, last, ReduceOpType.SUM)) {
            check.equal("reduceScatterTensor(dim " + last + ")", expected, actual, false);
        }
        try (Tensor shard = shardOf(full, 0, world, rank); Tensor expected = shardOf(full, last, world, rank);
             Tensor actual = group.allToAll(shard, 0, last, shape[0])) {
            check.equal("allToAll(0 -> " + last + ")", expected, actual, false);
        }
        try (Tensor shard = shardOf(full, last, world, rank); Tensor expected = shardOf(full, 0, world, rank);
             Tensor actual = group.allToAll(shard, last, 0, shape[last])) {
            check.equal("allToAll(" + last + " -> 0)", expected, actual, false);
        }
        for (int dim : new int[] {0, last}) {
            try (Tensor expected = shardOf(full, dim, world, rank); Tensor actual = group.replicateToShard(full, dim)) {
                check.equal("replicateToShard(dim " + dim + ")", expected, actual, false);
            }
        }
        full.close();
        partials.forEach(Tensor::close);
        equalShaped.forEach(Tensor::close);
        return check.failures;
    }

    /** {@code t} moved to {@code device} (closing {@code t}), or {@code t} itself on the CPU. */
    static Tensor onDevice(Tensor t, Device device) {
        if (device.kind() == DeviceKind.CPU) {
            return t;
        }
        try (t) {
            return TorchTensors.to(t, device);
        }
    }

    /** Rank {@code rank}'s balanced shard of {@code t} on {@code dim}, contiguous. */
    static Tensor shardOf(Tensor t, int dim, int world, int rank) {
        try (Tensor view = t.narrow(dim, BalancedSplit.offset(t.size(dim), world, rank), BalancedSplit.size(t.size(dim), world, rank))) {
            return view.contiguous().clone();
        }
    }

    static Tensor cat(List<Tensor> pieces, int dim) {
        try (TensorVector v = new TensorVector(pieces.toArray(Tensor[]::new)); TensorArrayRef ref = new TensorArrayRef(v)) {
            return torch.cat(ref, dim);
        }
    }

    /** Collects mismatches instead of throwing, so every rank keeps calling the collectives. */
    static final class Checker {
        final List<String> failures = new ArrayList<>();
        private final int rank;

        Checker(int rank) {
            this.rank = rank;
        }

        void equal(String what, Tensor expected, Tensor actual, boolean approximately) {
            if (expected.is_cuda() || actual.is_cuda()) {
                if (!actual.is_contiguous()) {
                    failures.add("rank " + rank + " " + what + ": result is not contiguous");
                }
                // Compared on the host; the copies are contiguous.
                try (Tensor e = expected.cpu().contiguous(); Tensor a = actual.cpu().contiguous()) {
                    equal(what, e, a, approximately);
                }
                return;
            }
            boolean ok = approximately
                ? Arrays.equals(TorchTensors.shape(expected), TorchTensors.shape(actual))
                    && TorchTensors.dtype(expected) == TorchTensors.dtype(actual)
                    && torch.allclose(expected.to(ScalarType.Double), actual.to(ScalarType.Double), 1e-2, 1e-2, false)
                : TestTensors.same(expected, actual);
            if (!ok) {
                failures.add("rank " + rank + " " + what + ": " + TestTensors.diff(expected, actual));
            }
            if (!actual.is_contiguous()) {
                failures.add("rank " + rank + " " + what + ": result is not contiguous");
            }
        }

        void that(String what, boolean ok, String detail) {
            if (!ok) {
                failures.add("rank " + rank + " " + what + ": " + detail);
            }
        }
    }
}
