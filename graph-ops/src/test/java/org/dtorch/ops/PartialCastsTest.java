package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A cast of partial values is only allowed where casting each part and then reducing gives the cast of the
 * reduction; every other cast is refused before anything runs, naming the operator, the placements and the way out.
 */
@Timeout(120)
class PartialCastsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();

    private static DeviceMesh line() {
        return dt.mesh(0, 1, 2, 3);
    }

    @Test
    void shouldRefuseABoolCastOfAPartialSumWhosePartsCancel() {
        DTensor partial = dt.tensor(new long[] {1, -1}, new long[] {2}, dt.mesh(0, 1), Placement.shard(0)).sum();
        assertEquals(List.of(Placement.partial()), partial.placements());
        try (DTensor implicit = partial.to(ScalarType.Bool); Tensor value = implicit.toTorch()) {
            assertEquals("0", TorchTensors.format(value, 1), "implicit: the partial sums are reduced before the cast");
        }
        ShardingException e = Strict.refuses(dt, ShardingException.class, () -> partial.to(ScalarType.Bool));
        assertTrue(e.getMessage().startsWith("to(bool): cannot take inputs with placements [P(sum)]"), e.getMessage());
        assertTrue(e.getMessage().contains("redistribute to R (Replicate) first"), e.getMessage());
        try (DTensor reduced = partial.redistribute(R); DTensor asBool = reduced.to(ScalarType.Bool); Tensor value = asBool.toTorch()) {
            assertEquals("0", TorchTensors.format(value, 1), "the sum is 0, so the cast is False");
        }
    }

    /** A partial tensor, the same reduced first, and a cast that must be allowed (or refused) on the partial one. */
    private record Cast(String partial, ScalarType from, ScalarType to, boolean allowed) {
    }

    @Test
    void shouldAllowExactlyTheCastsThatCommuteWithTheReduction() {
        List<Cast> cases = List.of(
            new Cast("sum", ScalarType.Long, ScalarType.Double, true),
            new Cast("sum", ScalarType.Long, ScalarType.Int, true),
            new Cast("sum", ScalarType.Int, ScalarType.Long, true),
            new Cast("sum", ScalarType.Double, ScalarType.Float, true),
            new Cast("sum", ScalarType.Long, ScalarType.Bool, false),
            new Cast("sum", ScalarType.Double, ScalarType.Long, false),
            new Cast("sum", ScalarType.Double, ScalarType.Bool, false),
            new Cast("max", ScalarType.Double, ScalarType.Float, true),
            new Cast("max", ScalarType.Double, ScalarType.Long, false),
            new Cast("max", ScalarType.Long, ScalarType.Double, true),
            new Cast("max", ScalarType.Char, ScalarType.Long, true),
            new Cast("max", ScalarType.Bool, ScalarType.Long, true),
            new Cast("max", ScalarType.Long, ScalarType.Char, false),
            new Cast("max", ScalarType.Char, ScalarType.Byte, false),
            new Cast("max", ScalarType.Long, ScalarType.Bool, false));
        for (Cast c : cases) {
            String what = "P(" + c.partial() + ") " + TorchTensors.dtypeName(c.from()) + " -> " + TorchTensors.dtypeName(c.to());
            DTensor x = dt.tensor(new double[] {3.7, -4.2, 5.5, -1.25, 0, 2.5, -7.75, 1}, new long[] {8}, line(), Placement.shard(0)).to(c.from());
            DTensor partial = c.partial().equals("sum") ? x.sum(0) : x.max(0);
            assertTrue(partial.placements().getFirst().isPartial(), what);
            if (!c.allowed()) {
                ShardingException e = Strict.refuses(dt, ShardingException.class, () -> partial.to(c.to()));
                assertTrue(e.getMessage().contains(partial.placements().toString()), e.getMessage());
                assertFalse(partial.to(c.to()).placements().getFirst().isPartial(), what + ": reduced first");
            }
            try (Tensor castFirst = partial.to(c.to()).redistribute(R).toTorch();
                 Tensor reducedFirst = partial.redistribute(R).to(c.to()).toTorch()) {
                assertNull(OperatorsTest.compare(reducedFirst, castFirst), what);
            }
        }
    }

    @Test
    void shouldAllowEveryCastOfPartialValuesOfTheSameDtypeAndOfReplicatedOnes() {
        DTensor x = dt.tensor(new long[] {1, -1, 2, -2}, new long[] {4}, line(), Placement.shard(0));
        DTensor partial = x.sum();
        assertEquals(partial.dtype(), partial.to(ScalarType.Long).dtype());
        for (ReduceOpType op : List.of(ReduceOpType.SUM, ReduceOpType.MAX, ReduceOpType.MIN, ReduceOpType.PRODUCT)) {
            DTensor p = x.redistribute(R).redistribute(Placement.partial(op));
            Strict.refuses(dt, ShardingException.class, () -> p.to(ScalarType.Bool));
            assertFalse(p.to(ScalarType.Bool).placements().getFirst().isPartial(), op + ": reduced first");
        }
        try (DTensor asBool = x.to(ScalarType.Bool); Tensor value = asBool.toTorch()) {
            assertEquals("[1, 1, 1, 1]", TorchTensors.format(value, 4));
        }
    }

    @Test
    void shouldRefuseACopyIntoAPartialTensorThatWouldCastEachPart() {
        DTensor ints = dt.tensor(new long[] {0, 0, 0, 0}, new long[] {4}, line(), Placement.shard(0)).sum();
        DTensor halves = dt.tensor(new double[] {0.5, 0.5, 0.5, 0.5}, new long[] {4}, line(), Placement.shard(0)).sum();
        ShardingException e = assertThrows(ShardingException.class, () -> ints.copy_(halves));
        assertTrue(e.getMessage().startsWith("copy_: cannot take inputs with placements [P(sum)] and [P(sum)]"), e.getMessage());
        DTensor doubles = dt.tensor(new double[] {0, 0, 0, 0}, new long[] {4}, line(), Placement.shard(0)).sum();
        DTensor counts = dt.tensor(new long[] {1, 2, 3, 4}, new long[] {4}, line(), Placement.shard(0)).sum();
        doubles.copy_(counts);
        try (DTensor whole = doubles.redistribute(R); Tensor value = whole.toTorch()) {
            assertEquals("10.0", TorchTensors.format(value, 1));
        }
    }
}
