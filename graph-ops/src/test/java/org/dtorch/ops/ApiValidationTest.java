package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * The public Java API takes dimensions as torch does (negative ones count from the end; out of range is an
 * index error naming the valid range), names the argument that is null, refuses shapes whose element count a
 * long cannot hold, and frees what it allocated when it refuses its input.
 */
@Timeout(120)
class ApiValidationTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();

    private static DeviceMesh line() {
        return dt.mesh(0, 1, 2, 3);
    }

    @Test
    void shouldReadSizesWithNegativeDimensions() {
        DTensor t = dt.zeros(new long[] {4, 6}, line(), Placement.shard(1));
        assertEquals(6, t.size(-1));
        assertEquals(4, t.size(-2));
        assertEquals(4, t.size(0));
        IndexOutOfBoundsException high = assertThrows(IndexOutOfBoundsException.class, () -> t.size(2));
        assertEquals("size: dimension 2 is out of range (expected to be in range of [-2, 1])", high.getMessage());
        IndexOutOfBoundsException low = assertThrows(IndexOutOfBoundsException.class, () -> t.size(-3));
        assertEquals("size: dimension -3 is out of range (expected to be in range of [-2, 1])", low.getMessage());
    }

    @Test
    void shouldTakeNegativeDimensionsInEveryOperatorAsTorchDoes() {
        Map<String, Function<DTensor, DTensor>> ours = new LinkedHashMap<>();
        Map<String, Function<Tensor, Tensor>> theirs = new LinkedHashMap<>();
        ours.put("sum(-1)", t -> t.sum(-1));
        theirs.put("sum(-1)", t -> t.sum(-1));
        ours.put("mean(-1, 0) keepdim", t -> t.mean(new int[] {-1, 0}, true));
        theirs.put("mean(-1, 0) keepdim", t -> t.mean(new long[] {-1, 0}, true, new org.bytedeco.pytorch.ScalarTypeOptional()));
        ours.put("max(-2)", t -> t.max(-2));
        theirs.put("max(-2)", t -> t.amax(new long[] {-2}, false));
        ours.put("softmax(-1)", t -> t.softmax(-1));
        theirs.put("softmax(-1)", t -> t.softmax(-1));
        ours.put("narrow(-1, -3, 2)", t -> t.narrow(-1, -3, 2));
        theirs.put("narrow(-1, -3, 2)", t -> t.narrow(-1, -3, 2).contiguous());
        ours.put("transpose(-1, -2)", t -> t.transpose(-1, -2));
        theirs.put("transpose(-1, -2)", t -> t.transpose(-1, -2).contiguous());
        ours.put("permute(-1, 0)", t -> t.permute(-1, 0));
        theirs.put("permute(-1, 0)", t -> t.permute(-1, 0).contiguous());
        ours.put("cat(-1)", t -> dt.cat(List.of(t, t), -1));
        theirs.put("cat(-1)", t -> {
            try (TensorVector v = new TensorVector(t, t); TensorArrayRef ref = new TensorArrayRef(v)) {
                return torch.cat(ref, -1);
            }
        });
        try (Tensor full = OperatorsTest.reference(new long[] {4, 6}, ScalarType.Float, 5)) {
            DTensor x = dt.tensor(full, line(), Placement.shard(0));
            for (String name : ours.keySet()) {
                try (Tensor expected = theirs.get(name).apply(full); DTensor result = ours.get(name).apply(x); Tensor actual = result.toTorch()) {
                    assertNull(OperatorsTest.compare(expected, actual), name);
                }
            }
        }
    }

    @Test
    void shouldRefuseOutOfRangeDimensionsWithTheValidRange() {
        DTensor x = dt.zeros(new long[] {4, 6}, line(), Placement.shard(0));
        Map<String, Executable> calls = new LinkedHashMap<>();
        calls.put("sum", () -> x.sum(2));
        calls.put("mean", () -> x.mean(-3));
        calls.put("max", () -> x.max(5));
        calls.put("softmax", () -> x.softmax(2));
        calls.put("narrow", () -> x.narrow(-3, 0, 1));
        calls.put("transpose", () -> x.transpose(0, 2));
        calls.put("permute", () -> x.permute(0, 2));
        calls.put("cat", () -> dt.cat(List.of(x, x), 2));
        for (Map.Entry<String, Executable> call : calls.entrySet()) {
            IndexOutOfBoundsException e = assertThrows(IndexOutOfBoundsException.class, call.getValue(), call.getKey());
            assertTrue(e.getMessage().startsWith(call.getKey() + ": dimension ")
                && e.getMessage().endsWith("is out of range (expected to be in range of [-2, 1])"), e.getMessage());
        }
        IllegalArgumentException start = assertThrows(IllegalArgumentException.class, () -> x.narrow(1, Long.MAX_VALUE, 1));
        assertTrue(start.getMessage().startsWith("narrow: start " + Long.MAX_VALUE), start.getMessage());
        assertThrows(IllegalArgumentException.class, () -> x.narrow(1, -7, 1));
        assertThrows(IllegalArgumentException.class, () -> x.narrow(1, 2, Long.MAX_VALUE));
        assertEquals(0.0, x.sum().toTorch().item_double());
    }

    @Test
    void shouldNameTheArgumentThatIsNull() {
        DTensor x = dt.zeros(new long[] {4}, line(), Placement.shard(0));
        Map<String, Executable> calls = new LinkedHashMap<>();
        calls.put("to: dtype is null", () -> x.to(null));
        calls.put("add: other is null", () -> x.add((DTensor) null));
        calls.put("sub: other is null", () -> x.sub((DTensor) null));
        calls.put("mul: other is null", () -> x.mul((DTensor) null));
        calls.put("div: other is null", () -> x.div((DTensor) null));
        calls.put("matmul: other is null", () -> x.matmul(null));
        calls.put("sum: dims is null", () -> x.sum((int[]) null));
        calls.put("mean: dims is null", () -> x.mean(null, false));
        calls.put("max: dims is null", () -> x.max((int[]) null));
        calls.put("permute: dims is null", () -> x.permute((int[]) null));
        calls.put("reshape: shape is null", () -> x.reshape((long[]) null));
        calls.put("view: shape is null", () -> x.view((long[]) null));
        calls.put("redistribute: mesh is null", () -> x.redistribute((DeviceMesh) null, R));
        calls.put("redistribute: placements[0] is null", () -> x.redistribute((Placement) null));
        calls.put("copy_: source is null", () -> x.copy_(null));
        calls.put("zeros: shape is null", () -> dt.zeros((long[]) null));
        calls.put("ones: dtype is null", () -> dt.ones(new long[] {4}, null, line()));
        calls.put("empty: mesh is null", () -> dt.empty(new long[] {4}, ScalarType.Float, null));
        calls.put("full: placements[1] is null", () -> dt.full(1.0, new long[] {4}, dt.initDeviceMesh(new int[] {2, 2}), R, null));
        calls.put("randn: shape is null", () -> dt.randn(1, null, line()));
        calls.put("tensor: data is null", () -> dt.tensor((float[]) null, new long[] {1}, line()));
        calls.put("tensor: shape is null", () -> dt.tensor(new long[] {1}, null, line()));
        calls.put("tensor: data is null ", () -> dt.tensor((Tensor) null, line()));
        calls.put("linear: weight is null", () -> dt.linear(x, null));
        calls.put("linear: bias is null", () -> dt.linear(x, x, null));
        calls.put("cat: tensors is null", () -> dt.cat(null, 0));
        calls.put("cat: tensors[1] is null", () -> dt.cat(Arrays.asList(x, null), 0));
        calls.put("getTensorAsync: tensor is null", () -> dt.getTensorAsync(null));
        calls.put("mesh: deviceIds is null", () -> dt.mesh((long[]) null));
        calls.put("initDeviceMesh: shape is null", () -> dt.initDeviceMesh(null));
        calls.put("defaultMesh: shape is null", () -> DTorchOptions.builder().defaultMesh(null));
        calls.put("defaultMesh: dimNames[0] is null", () -> DTorchOptions.builder().defaultMesh(new int[] {4}, (String) null));
        calls.put("timeout: value is null", () -> DTorchOptions.builder().timeout(null));
        calls.put("shutdownTimeout: value is null", () -> DTorchOptions.builder().shutdownTimeout(null));
        calls.put("deviceKind: value is null", () -> DTorchOptions.builder().deviceKind(null));
        for (Map.Entry<String, Executable> call : calls.entrySet()) {
            NullPointerException e = assertThrows(NullPointerException.class, call.getValue(), call.getKey());
            assertEquals(call.getKey().strip(), e.getMessage());
        }
        assertEquals(0.0, x.sum().toTorch().item_double());
        assertTrue(DTorchOptions.builder().timeout(Duration.ofSeconds(1)).build().runtime().timeout().equals(Duration.ofSeconds(1)));
    }

    @Test
    void shouldRefuseShapesWhoseElementCountOverflowsOrIsNegative() {
        long big = 1L << 32;
        IllegalArgumentException zeros = assertThrows(IllegalArgumentException.class, () -> dt.zeros(new long[] {big, big}, line()));
        assertEquals("zeros: shape [4294967296, 4294967296] has more elements than a long can count", zeros.getMessage());
        IllegalArgumentException negative = assertThrows(IllegalArgumentException.class, () -> dt.ones(new long[] {-1, 2}, line()));
        assertEquals("ones: negative dimension -1 in shape [-1, 2]", negative.getMessage());
        assertThrows(IllegalArgumentException.class, () -> dt.tensor(new float[0], new long[] {big, big, big, big}, line()));
        DTensor empty = dt.zeros(new long[] {0}, line());
        IllegalArgumentException reshape = assertThrows(IllegalArgumentException.class, () -> empty.reshape(big * 2, big * 2));
        assertTrue(reshape.getMessage().startsWith("reshape: "), reshape.getMessage());
        assertThrows(IllegalArgumentException.class, () -> empty.reshape(-1, big * 2, big * 2));
        // A leading zero makes any product legal, as in libtorch (which multiplies from the left, checking overflow).
        assertEquals(List.of(0L, big, big), Arrays.stream(empty.reshape(0, big, big).shape()).boxed().toList());
    }

    @Test
    void shouldFreeTheCopyOfJavaDataWhenTheLengthDoesNotFitTheShape() {
        int n = 1 << 22;
        for (Executable call : List.<Executable>of(
            () -> dt.tensor(new float[n], new long[] {7}, line()),
            () -> dt.tensor(new double[n], new long[] {7}, line()),
            () -> dt.tensor(new long[n], new long[] {7}, line()))) {
            long before = Pointer.totalBytes();
            assertThrows(IllegalArgumentException.class, call);
            long grown = Pointer.totalBytes() - before;
            assertTrue(grown < n, "a refused tensor(...) kept " + grown + " bytes of native memory");
        }
    }

    @Test
    void shouldFreeTheCopyOfJavaDataWhenThePlacementsAreRefused() {
        int n = 1 << 24;
        float[] data = new float[n];
        long before = Pointer.physicalBytes();
        for (int i = 0; i < 4; i++) {
            assertThrows(IllegalArgumentException.class, () -> dt.tensor(data, new long[] {n}, line(), Placement.shard(1)));
        }
        long grown = Pointer.physicalBytes() - before;
        assertTrue(grown < 2L * n * Float.BYTES, "four refused tensor(...) calls of " + n * Float.BYTES + " bytes grew the process by " + grown + " bytes");
    }
}
