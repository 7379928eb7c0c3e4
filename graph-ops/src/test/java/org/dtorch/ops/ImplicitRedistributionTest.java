package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.testing.TestTensors;
import org.dtorch.core.trace.Trace;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Operators whose inputs fit none of their strategies move them the cheapest way and give torch's values, the hand-written
 * ones of the Java API as the generic path; the moves are operators of their own, named as implicit, whose collectives'
 * bytes the profiler counts; the strict mode refuses the same programs with the operators' own messages.
 */
@Timeout(120)
class ImplicitRedistributionTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    private static final Placement P = Placement.partial();

    private static void assertValue(Tensor want, DTensor got, String what) {
        try (Tensor value = got.toTorch()) {
            assertNull(OperatorsTest.compare(want, value), what);
        }
    }

    @Test
    void shouldRunHandWrittenOperatorsOnInputsOfAnyPlacementsAsTorchDoes() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = TestTensors.pattern(new long[] {6, 5}, ScalarType.Float, 1, 9, -4);
             Tensor b = TestTensors.pattern(new long[] {6, 5}, ScalarType.Float, 2, 7, -3);
             Tensor sum = a.add(b); Tensor product = a.mul(b); Tensor relu = a.relu(); Scalar one = new Scalar(1.0); Tensor plusOne = a.add(one);
             Tensor rowSums = a.sum(new long[] {1}); Tensor rowMax = a.amax(new long[] {1}, false)) {
            List<Placement> all = List.of(R, S0, S1, P);
            for (Placement pa : all) {
                DTensor x = place(a, line, pa);
                assertValue(relu, x.relu(), "relu of " + pa);
                assertValue(plusOne, x.add(1.0), pa + " + 1");
                assertValue(rowSums, x.sum(1), "sum over dim 1 of " + pa);
                assertValue(rowMax, x.max(1), "max over dim 1 of " + pa);
                try (Tensor asBool = a.to(ScalarType.Bool)) {
                    assertValue(asBool, x.to(ScalarType.Bool), "bool of " + pa);
                }
                for (Placement pb : all) {
                    DTensor y = place(b, line, pb);
                    assertValue(sum, x.add(y), pa + " + " + pb);
                    assertValue(product, x.mul(y), pa + " * " + pb);
                }
            }
        }
    }

    private static DTensor place(Tensor t, DeviceMesh mesh, Placement p) {
        return p.isPartial() ? dt.tensor(t, mesh, R).redistribute(p) : dt.tensor(t, mesh, p);
    }

    @Test
    void shouldChooseTheCheapestMove() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DTensor rows = dt.ones(new long[] {8, 8}, line, S0);
        DTensor whole = dt.ones(new long[] {8, 8}, line, R);
        assertEquals(List.of(S0), rows.add(whole).placements(), "the replicated input is sliced locally, not the shards gathered");
        DTensor partial = rows.sum(0);
        assertEquals(List.of(S0), partial.relu().placements(), "partial sums are reduce-scattered, half an all-reduce's traffic");
        assertEquals(List.of(P), partial.add(dt.ones(new long[] {8}, line, R)).placements(),
            "add is linear: the replicated input becomes partial locally and nothing is reduced");
    }

    @Test
    void shouldNameTheImplicitMovesInTheProfilerWithTheirBytes() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DTensor rows = dt.ones(new long[] {64, 16}, line, S0);
        DTensor columns = dt.ones(new long[] {64, 16}, line, S1);
        dt.sync();
        dt.profiler().start();
        rows.add(columns).close();
        dt.sync();
        Trace trace = dt.profiler().stop();
        Trace.Summary moved = trace.keyAverages().stream().filter(s -> s.name().equals("redistribute (implicit, for add)")).findFirst()
            .orElseThrow(() -> new AssertionError("no implicit move in\n" + trace.table()));
        assertEquals("kernel", moved.category());
        assertEquals(4, moved.calls(), "one kernel per device");
        assertTrue(moved.bytes() > 0, "the all-to-all's bytes: " + trace.table());
        assertTrue(trace.table().contains("redistribute (implicit, for add)"), trace.table());
    }

    @Test
    void shouldReducePartialValuesOfDifferentReductionsInOneOrder() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        Placement product = Placement.partial(org.dtorch.core.communication.ReduceOpType.PRODUCT);
        Placement max = Placement.partial(org.dtorch.core.communication.ReduceOpType.MAX);
        try (Tensor three = torch.full(new long[] {2, 3}, new Scalar(3.0)); Tensor a = TestTensors.pattern(new long[] {2, 3, 4}, ScalarType.Float, 1, 5, 1);
             Tensor b = TestTensors.pattern(new long[] {2, 4, 2}, ScalarType.Float, 2, 3, 1); Tensor want = torch.bmm(a, b)) {
            DTensor x = dt.tensor(three, grid, R, R);
            for (Placement[] mixed : new Placement[][] {{product, P}, {P, product}, {max, P}, {P, max}, {product, max}}) {
                DTensor y = x.redistribute(mixed);
                assertValue(three, y, List.of(mixed) + " to R");
                assertValue(three, y.redistribute(mixed[0], R), List.of(mixed) + ", the inner dimension reduced first");
                assertValue(three, y.redistribute(S0, mixed[1]).redistribute(R, R), List.of(mixed) + " through a shard");
            }
            DTensor da = dt.tensor(a, grid, R, R).redistribute(P, product);
            DTensor db = dt.tensor(b, grid, R, R).redistribute(product, P);
            assertValue(want, dt.aten(AtenCall.of("bmm", "T,T", null, null), da, db).getFirst(), "bmm of mixed partial inputs");
        }
    }

    @Test
    void shouldRefuseInStrictModeWithTheOperatorsOwnMessages() {
        try (DTorch strict = DTorch.init(DTorchOptions.builder().devices(4).implicitRedistribution(false).build())) {
            assertFalse(strict.implicitRedistribution());
            DeviceMesh line = strict.initDeviceMesh(new int[] {4});
            DTensor rows = strict.ones(new long[] {8, 8}, line, S0);
            DTensor columns = strict.ones(new long[] {8, 8}, line, S1);
            ShardingException add = assertThrows(ShardingException.class, () -> rows.add(columns));
            assertTrue(add.getMessage().startsWith("add: cannot take inputs with placements [S(0)] and [S(1)]"), add.getMessage());
            ShardingException generic = assertThrows(ShardingException.class,
                () -> strict.aten(AtenCall.of("add", "T,T", null, null), rows, columns));
            assertTrue(generic.getMessage().contains("implicit redistribution is off (strict mode)"), generic.getMessage());
            DTensor fits = rows.add(strict.ones(new long[] {8, 8}, line, S0));
            assertEquals(List.of(S0), fits.placements(), "inputs that fit run");
            strict.setImplicitRedistribution(true);
            try (Tensor two = rows.add(columns).toTorch()) {
                assertEquals(128.0, two.sum().item_double(), 0.0);
            }
        }
    }
}
