package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.function.Function;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Integers stay exact end to end: int64 scalars above 2^53 (where a double loses them) through factories, scalar
 * operators and ranges, and torch's type promotion for a tensor and a scalar, with torch itself as the reference.
 */
@Timeout(120)
class ExactIntegersTest {
    /** 2^62 + 1: the nearest double is 2^62. */
    static final long BIG = (1L << 62) + 1;

    static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).build());
    }

    @AfterAll
    static void stop() {
        SharedWorkerProcesses.closeUnlessShared(dt);
    }

    static long[] longs(DTensor t) {
        try (Tensor whole = t.toTorch(); Tensor asLong = whole.to(ScalarType.Long); Tensor flat = asLong.contiguous()) {
            long[] out = new long[(int) flat.numel()];
            if (out.length > 0) {
                new LongPointer(flat.data_ptr()).capacity(out.length).get(out);
            }
            return out;
        }
    }

    private static DeviceMesh line() {
        return dt.mesh(0, 1, 2, 3);
    }

    @Test
    void shouldFillInt64ExactlyAbove2To53() {
        DTensor filled = dt.full(BIG, new long[] {8}, ScalarType.Long, line(), Placement.shard(0));
        assertArrayEquals(new long[] {BIG, BIG, BIG, BIG, BIG, BIG, BIG, BIG}, longs(filled));
        DTensor negative = dt.full(-BIG, new long[] {2}, ScalarType.Long, line());
        assertArrayEquals(new long[] {-BIG, -BIG}, longs(negative));
    }

    @Test
    void shouldApplyLongScalarsToInt64TensorsExactly() {
        DTensor x = dt.tensor(new long[] {0, 1, -1, 4}, new long[] {4}, line(), Placement.shard(0));
        assertArrayEquals(new long[] {BIG, BIG + 1, BIG - 1, BIG + 4}, longs(x.add(BIG)));
        assertArrayEquals(new long[] {-BIG, 1 - BIG, -1 - BIG, 4 - BIG}, longs(x.sub(BIG)));
        DTensor ones = dt.full(1L, new long[] {4}, ScalarType.Long, line(), Placement.shard(0));
        assertArrayEquals(new long[] {BIG, BIG, BIG, BIG}, longs(ones.mul(BIG)));
        assertArrayEquals(new long[] {BIG - 1, BIG - 1, BIG - 1, BIG - 1}, longs(ones.rsub(BIG)));
    }

    @Test
    void shouldMakeExactInt64Ranges() {
        DTensor r = dt.arange(BIG, BIG + 8, 2, ScalarType.Long, line(), Placement.shard(0));
        assertArrayEquals(new long[] {BIG, BIG + 2, BIG + 4, BIG + 6}, longs(r));
        DTensor down = dt.arange(BIG, BIG - 3, -1, ScalarType.Long, dt.mesh(0, 1), Placement.shard(0));
        assertArrayEquals(new long[] {BIG, BIG - 1, BIG - 2}, longs(down));
        // The span end - start overflows a long, the values do not.
        DTensor wide = dt.arange(Long.MAX_VALUE - 1, Long.MIN_VALUE, -(1L << 62), ScalarType.Long, line(), Placement.shard(0));
        assertArrayEquals(new long[] {Long.MAX_VALUE - 1, Long.MAX_VALUE - 1 - (1L << 62), -2, -2 - (1L << 62)}, longs(wide));
    }

    /** One tensor-and-scalar case: its result dtype must be torch's. */
    private record Promotion(String scalar, Function<DTensor, DTensor> op, Function<Tensor, Tensor> torchOp) {
    }

    @Test
    void shouldPromoteLikeTorchForATensorAndAScalar() {
        List<ScalarType> dtypes = List.of(ScalarType.Bool, ScalarType.Byte, ScalarType.Char, ScalarType.Int, ScalarType.Long,
            ScalarType.Half, ScalarType.Float, ScalarType.Double);
        List<Promotion> cases = List.of(
            new Promotion("add 3L", t -> t.add(3L), t -> t.add(new Scalar(3L))),
            new Promotion("add 2.5", t -> t.add(2.5), t -> t.add(new Scalar(2.5))),
            new Promotion("mul 3L", t -> t.mul(3L), t -> t.mul(new Scalar(3L))),
            new Promotion("mul 0.5", t -> t.mul(0.5), t -> t.mul(new Scalar(0.5))),
            new Promotion("div 2.0", t -> t.div(2.0), t -> t.div(new Scalar(2.0))));
        for (ScalarType dtype : dtypes) {
            for (Promotion c : cases) {
                try (Tensor ones = torch.ones(new long[] {4}); Tensor local = ones.to(dtype); Tensor expected = c.torchOp().apply(local)) {
                    DTensor t = dt.tensor(local, line(), Placement.shard(0));
                    DTensor result = c.op().apply(t);
                    String what = TorchTensors.dtypeName(dtype) + " " + c.scalar();
                    assertEquals(TorchTensors.dtypeName(TorchTensors.dtype(expected)), TorchTensors.dtypeName(result.dtype()), what + ": inferred dtype");
                    try (Tensor actual = result.toTorch()) {
                        assertEquals(TorchTensors.dtypeName(TorchTensors.dtype(expected)), TorchTensors.dtypeName(TorchTensors.dtype(actual)),
                            what + ": value dtype");
                        assertEquals(TorchTensors.format(expected, 8), TorchTensors.format(actual, 8), what);
                    }
                }
            }
        }
    }

    @Test
    void shouldRefuseAScalarTheResultDtypeCannotHoldBeforeRunning() {
        DTensor small = dt.ones(new long[] {4}, ScalarType.Char, line(), Placement.shard(0));
        IllegalArgumentException add = assertThrows(IllegalArgumentException.class, () -> small.add(1000L));
        assertTrue(add.getMessage().contains("1000") && add.getMessage().contains("int8"), add.getMessage());
        IllegalArgumentException fill = assertThrows(IllegalArgumentException.class,
            () -> dt.full(300L, new long[] {4}, ScalarType.Byte, line()));
        assertTrue(fill.getMessage().startsWith("full: ") && fill.getMessage().contains("uint8"), fill.getMessage());
        assertThrows(IllegalArgumentException.class, () -> dt.full(Double.NaN, new long[] {4}, ScalarType.Long, line()));
        assertThrows(IllegalArgumentException.class, () -> dt.arange(0, 300, 1, ScalarType.Char, line()));
        // Nothing was queued: the runtime still answers.
        assertArrayEquals(new long[] {2, 2, 2, 2}, longs(small.add(1L)));
    }
}
