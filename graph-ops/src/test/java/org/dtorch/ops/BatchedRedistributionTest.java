package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.kernel.BatchedConvert;
import org.dtorch.core.kernel.ConvertKernel;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * An operator whose inputs all move before it runs moves them in one operator ({@link RedistributeAllSpec}): partial sums
 * on one group are reduced together ({@code allReduceSum_}), other moves as one by one. Results compared exactly with torch
 * on one device (integer-valued float32), on Gloo and the same-device backend, 1-D and 2x2 meshes; one tensor passed as
 * both inputs is moved twice, each move on its own copy.
 */
@Timeout(120)
class BatchedRedistributionTest {
    private static final long[] SHAPE = {8, 6};

    private static Tensor values(long shift) {
        return TestTensors.pattern(SHAPE, ScalarType.Float, shift, 7, -3);
    }

    private static void assertSame(Tensor want, DTensor got, String what) {
        try (Tensor value = got.toTorch()) {
            assertTrue(TestTensors.same(want, value), what + ": " + TestTensors.diff(want, value));
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void shouldMatchTorchWhenSeveralInputsMove(boolean sameDevice) {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).sameDevice(sameDevice).build());
             Tensor a = values(0); Tensor b = values(5); Tensor product = a.mul(b); Tensor larger = torch.maximum(a, b);
             Tensor quotientBase = b.abs();
             Scalar one = new Scalar(1f); Tensor positive = quotientBase.add(one); Tensor quotient = a.div(positive)) {
            DeviceMesh line = dt.initDeviceMesh(new int[] {4});
            DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
            try (DTensor ra = dt.tensor(a, line, Placement.replicate()); DTensor rb = dt.tensor(b, line, Placement.replicate());
                 DTensor p = ra.redistribute(Placement.partial()); DTensor q = rb.redistribute(Placement.partial());
                 DTensor sb = dt.tensor(b, line, Placement.shard(1)); DTensor rPositive = dt.tensor(positive, line, Placement.replicate());
                 DTensor pPositive = rPositive.redistribute(Placement.partial());
                 DTensor pq = dt.aten(call("maximum", "T,T", null, null), p, q).getFirst();
                 DTensor same = dt.aten(call("maximum", "T,T", null, null), p, p).getFirst();
                 DTensor ps = dt.aten(call("maximum", "T,T", null, null), p, sb).getFirst();
                 DTensor onePartialKept = dt.aten(call("mul", "T,T", null, null), p, q).getFirst();
                 DTensor pp = dt.aten(call("div", "T,T", null, null), p, pPositive).getFirst();
                 DTensor ssa = dt.tensor(a, grid, Placement.shard(0), Placement.replicate());
                 DTensor ssb = dt.tensor(b, grid, Placement.shard(0), Placement.replicate());
                 DTensor sa = ssa.redistribute(Placement.shard(0), Placement.partial());
                 DTensor sq = ssb.redistribute(Placement.shard(0), Placement.partial());
                 DTensor nested = dt.aten(call("maximum", "T,T", null, null), sa, sq).getFirst()) {
                // maximum is linear in neither input: both partial sums are reduced, in one operator.
                assertSame(larger, pq, "maximum(partial, partial)");
                assertSame(a, same, "one partial sum as both inputs");
                assertSame(larger, ps, "maximum(partial, shard)");
                assertEquals(List.of(Placement.partial()), onePartialKept.placements(), "mul is linear in one factor: one stays partial");
                assertSame(product, onePartialKept, "partial * partial");
                try (Tensor got = pp.toTorch()) {
                    assertTrue(torch.allclose(quotient, got), "partial / partial: " + TestTensors.diff(quotient, got));
                }
                assertTrue(nested.placements().stream().noneMatch(Placement::isPartial), nested.placements().toString());
                assertSame(larger, nested, "maximum([S(0), P], [S(0), P]) on 2 x 2");
            }
        }
    }

    @Test
    void shouldBatchOnlySumReductionsOfOneGroup() {
        DeviceMesh line = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
        DeviceMesh square = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of("dp", "tp"));
        ConvertKernel sum = kernel(line, List.of(Placement.partial()), List.of(Placement.replicate()));
        ConvertKernel max = kernel(line, List.of(Placement.partial(ReduceOpType.MAX)), List.of(Placement.replicate()));
        ConvertKernel gather = kernel(line, List.of(Placement.shard(0)), List.of(Placement.replicate()));
        ConvertKernel inner = kernel(square, List.of(Placement.shard(0), Placement.partial()), List.of(Placement.shard(0), Placement.replicate()));
        ConvertKernel outer = kernel(square, List.of(Placement.partial(), Placement.shard(0)), List.of(Placement.replicate(), Placement.shard(0)));
        ConvertKernel both = kernel(square, List.of(Placement.partial(), Placement.partial()), List.of(Placement.replicate(), Placement.replicate()));
        assertEquals(3, new BatchedConvert(List.of(sum, gather, sum, sum)).batched());
        assertEquals(0, new BatchedConvert(List.of(sum, max, gather)).batched());
        assertEquals(0, new BatchedConvert(List.of(inner, outer)).batched(), "different mesh dimensions");
        assertEquals(2, new BatchedConvert(List.of(inner, outer, inner)).batched());
        assertEquals(0, new BatchedConvert(List.of(both, both)).batched(), "two steps each: run one by one");
    }

    private static ConvertKernel kernel(DeviceMesh mesh, List<Placement> from, List<Placement> to) {
        return ConvertKernel.of(new Sharding(mesh, from), new Sharding(mesh, to), SHAPE);
    }
}
