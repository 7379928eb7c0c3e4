package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.RankThreads;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The same-device all-reduce on the host, large enough that {@link HostReduction} splits it over several
 * threads and many pieces, equals Gloo's on the same inputs, for every op and several dtypes, in real rank
 * threads; and a result the caller holds is not overwritten by later all-reduces (the result cache).
 */
@Timeout(300)
class SameDeviceAllReduceTest {
    /** 3 MiB of float32 plus an odd tail: several threads' slices, pieces that do not divide it. */
    private static final long NUMEL = (3L << 18) + 4097;
    private static final int WORLD = 4;
    private static final ThreadGroupManager SAME = GroupFixtures.manager(GroupFixtures.Backend.SAME_DEVICE, Duration.ofSeconds(60));
    private static final ThreadGroupManager GLOO = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(60));

    @AfterAll
    static void close() {
        SAME.close();
        GLOO.close();
    }

    static Stream<Arguments> cases() {
        List<Arguments> all = new ArrayList<>();
        for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.Double, ScalarType.BFloat16, ScalarType.Long, ScalarType.Int)) {
            for (ReduceOpType op : ReduceOpType.values()) {
                boolean floating = dtype != ScalarType.Long && dtype != ScalarType.Int;
                if (op != ReduceOpType.AVG || floating) {
                    all.add(Arguments.of(dtype, op));
                }
            }
        }
        return all.stream();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void shouldEqualGlooOnRealThreads(ScalarType dtype, ReduceOpType op) {
        List<Long> ids = GroupFixtures.ids(WORLD);
        List<String> failures = RankThreads.run(WORLD, Duration.ofSeconds(120), rank -> {
            ThreadGroup same = SAME.getThreadGroup(DeviceKind.CPU, ids, rank);
            ThreadGroup gloo = GLOO.getThreadGroup(DeviceKind.CPU, ids, rank);
            try (Tensor input = input(rank, dtype); Tensor ours = same.allReduce(input, op); Tensor theirs = gloo.allReduce(input, op);
                 Tensor again = input(rank, dtype)) {
                if (!torch.equal(ours, theirs)) {
                    return "rank " + rank + ": same-device " + TorchTensors.describe(ours) + " differs from Gloo's";
                }
                return torch.equal(input, again) ? "" : "rank " + rank + ": the input was modified";
            }
        });
        assertEquals(List.of("", "", "", ""), failures, dtype + " " + op);
    }

    @Test
    void shouldNotOverwriteAResultTheCallerStillHolds() {
        List<Long> ids = GroupFixtures.ids(WORLD);
        List<String> failures = RankThreads.run(WORLD, Duration.ofSeconds(120), rank -> {
            ThreadGroup same = SAME.getThreadGroup(DeviceKind.CPU, ids, rank);
            try (Tensor ones = torch.ones(NUMEL); Scalar three = new Scalar(3f); Tensor threes = ones.mul(three)) {
                Tensor kept = same.allReduce(ones);
                for (int i = 0; i < 4; i++) {
                    same.allReduce(threes).close();
                }
                try (Tensor later = same.allReduce(threes); Tensor min = kept.min(); Tensor max = kept.max(); Tensor laterMin = later.min()) {
                    kept.close();
                    return min.item_float() == WORLD && max.item_float() == WORLD && laterMin.item_float() == 3 * WORLD ? ""
                        : "rank " + rank + ": held result " + min.item_float() + ".." + max.item_float() + ", later " + laterMin.item_float();
                }
            }
        });
        assertEquals(List.of("", "", "", ""), failures);
    }

    @Test
    void shouldReduceNonContiguousInputsAlikeOnBothBackends() {
        List<Long> ids = GroupFixtures.ids(WORLD);
        List<String> failures = RankThreads.run(WORLD, Duration.ofSeconds(120), rank -> {
            ThreadGroup same = SAME.getThreadGroup(DeviceKind.CPU, ids, rank);
            ThreadGroup gloo = GLOO.getThreadGroup(DeviceKind.CPU, ids, rank);
            // 1024 x 300 float32 (1.2 MB, cached results), transposed: not contiguous.
            try (Tensor flat = input(rank, ScalarType.Float); Tensor head = flat.narrow(0, 0, 1024L * 300); Tensor grid = head.view(1024, 300);
                 Tensor transposed = grid.t(); Tensor contiguous = transposed.contiguous();
                 Tensor ours = same.allReduce(transposed); Tensor theirs = gloo.allReduce(transposed); Tensor reference = gloo.allReduce(contiguous)) {
                return torch.equal(ours, reference) && torch.equal(theirs, reference) ? ""
                    : "rank " + rank + ": a non-contiguous input reduced differently from its contiguous copy";
            }
        });
        assertEquals(List.of("", "", "", ""), failures);
    }

    @Test
    void shouldReuseAResultBufferOnceTheCallerClosedIt() {
        List<Long> ids = GroupFixtures.ids(WORLD);
        List<String> failures = RankThreads.run(WORLD, Duration.ofSeconds(120), rank -> {
            ThreadGroup same = SAME.getThreadGroup(DeviceKind.CPU, ids, rank);
            try (Tensor ones = torch.ones(NUMEL)) {
                same.allReduce(ones).close();
                long first;
                try (Tensor result = same.allReduce(ones)) {
                    first = result.data_ptr().address();
                }
                try (Tensor result = same.allReduce(ones)) {
                    return result.data_ptr().address() == first ? "" : "rank " + rank + ": a closed result's buffer was not reused";
                }
            }
        });
        assertEquals(List.of("", "", "", ""), failures);
    }

    /** Small integers, -3 to 3, different per rank: every op is exact in every dtype tested. */
    private static Tensor input(int rank, ScalarType dtype) {
        try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Long));
             Tensor index = torch.arange(new Scalar(0L), new Scalar(NUMEL), options);
             Scalar shift = new Scalar((long) rank * 5 + 1); Scalar seven = new Scalar(7L); Scalar three = new Scalar(3L);
             Tensor shifted = index.add(shift); Tensor mod = shifted.remainder(seven); Tensor centred = mod.sub(three)) {
            return centred.to(dtype);
        }
    }
}
