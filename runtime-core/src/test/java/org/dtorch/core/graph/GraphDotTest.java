package org.dtorch.core.graph;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.testing.DotSyntax;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The graph dump's window and text without a runtime: operators recorded into a {@link GraphHistory} by hand, the DOT
 * compared exactly and checked by {@link DotSyntax}; the words for every kind of redistribution step. The whole
 * program through {@code DTorch.dumpGraph} is {@code GraphDumpTest} in graph-ops.
 */
@Timeout(60)
class GraphDotTest {
    private static final DeviceMesh PAIR = DeviceMesh.of(DeviceKind.CPU, 0, 1);
    private static final TensorMeta SHARDED = new TensorMeta(new long[] {4, 2}, ScalarType.Float, Sharding.of(PAIR, Placement.shard(0)));
    private static final String HEADER = "// Edges carry the placements of the tensor they pass.\n"
        + "digraph dtorch {\n  node [shape=box, fontname=\"monospace\"];\n  edge [fontname=\"monospace\"];\n";

    /** An operator type that is only ever recorded. */
    private record NamedSpec(String name) implements OpSpec {
        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            throw new UnsupportedOperationException("recorded only");
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            throw new UnsupportedOperationException("recorded only");
        }
    }

    private static Operator op(long id, String name, List<Operand> inputs, Operand output) {
        return new Operator(id, new NamedSpec(name), inputs, List.of(output));
    }

    @Test
    void shouldShowTheLatestOperatorsAndTheTensorsTheyReadFromEarlierOnes() {
        GraphHistory history = new GraphHistory(2);
        Operand a = new Operand(1, SHARDED);
        Operand b = new Operand(2, SHARDED);
        Operand c = new Operand(3, SHARDED);
        history.record(op(1, "make", List.of(), a));
        history.record(op(2, "double", List.of(a), b));
        history.record(op(3, "add", List.of(a, b), c));

        String dot = GraphDot.format(history.drain());

        assertEquals("// The logical graph of a DTorch program: the 2 operators added since the runtime started or the last dump"
            + " (1 earlier one not kept).\n" + HEADER
            + "  t1 [label=\"%1 (earlier)\\nfloat32[4, 2]\\nDeviceMesh(cpu, [0, 1])\", shape=ellipse, style=dashed];\n"
            + "  op2 [label=\"double#2\\nfloat32[4, 2]\\nDeviceMesh(cpu, [0, 1])\"];\n"
            + "  t1 -> op2 [label=\"S(0)\"];\n"
            + "  op3 [label=\"add#3\\nfloat32[4, 2]\\nDeviceMesh(cpu, [0, 1])\"];\n"
            + "  t1 -> op3 [label=\"S(0)\"];\n"
            + "  op2 -> op3 [label=\"S(0)\"];\n"
            + "}\n", dot);
        assertEquals(List.of("t1", "op2", "op3"), DotSyntax.check(dot));
        assertEquals("// The logical graph of a DTorch program: the 0 operators added since the runtime started or the last dump.\n"
            + HEADER + "}\n", GraphDot.format(history.drain()), "a dump starts a new window");
        history.record(op(4, "make", List.of(), a));
        GraphHistory.Window next = history.drain();
        assertEquals(List.of(4L), next.operators().stream().map(GraphHistory.RecordedOperator::id).toList());
        assertEquals(0, next.dropped(), "the count of operators not kept restarts too");
    }

    @Test
    void shouldEscapeQuotesBackslashesAndControlCharacters() {
        String name = "say \"hi\" \\ to\nall\tof\u007fus";
        assertEquals("\"say \\\"hi\\\" \\\\ to\\nall of us\"", GraphDot.quote(name));

        GraphHistory history = new GraphHistory(4);
        history.record(op(1, name, List.of(), new Operand(1, SHARDED)));
        String dot = GraphDot.format(history.drain());
        assertEquals(List.of("op1"), DotSyntax.check(dot));
        assertThrows(AssertionError.class, () -> DotSyntax.check(dot.replace("\\\"hi\\\"", "\"hi\"")),
            "the checker refuses a quote left raw");
        assertThrows(AssertionError.class, () -> DotSyntax.check(dot.replace("}\n", "")), "and an unclosed graph");
        assertThrows(AssertionError.class, () -> DotSyntax.check(dot.replace("}\n", "  op1 -> op9;\n}\n")),
            "and an edge to an undeclared node");
    }

    private static List<String> steps(Sharding from, Sharding to) {
        return GraphDot.steps(RedistributionPlanner.plan(from, to, new long[] {8, 4}));
    }

    private static Sharding onPair(Placement placement) {
        return Sharding.of(PAIR, placement);
    }

    @Test
    void shouldNameEveryStepOfAPlanWithItsCollective() {
        DeviceMesh square = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, List.of());
        assertEquals(List.of("S(0)->S(1): all-to-all on mesh dim 0", "P(sum)->S(0): reduce-scatter on mesh dim 1",
                "S(1)->R: all-gather on mesh dim 0"),
            steps(Sharding.of(square, Placement.shard(0), Placement.partial()),
                Sharding.of(square, Placement.replicate(), Placement.shard(0))));
        assertEquals(List.of("P(sum)->R: all-reduce on mesh dim 0", "transfer to DeviceMesh(cpu, [2, 3]): 2 pieces",
                "R->P(sum): local (one coordinate keeps the values) on mesh dim 0 of the target"),
            steps(onPair(Placement.partial()), Sharding.of(DeviceMesh.of(DeviceKind.CPU, 2, 3), Placement.partial())));
        assertEquals(List.of("S(0)->P(sum): local (shards padded with the identity) on mesh dim 0"),
            steps(onPair(Placement.shard(0)), onPair(Placement.partial())));
        assertEquals(List.of("R->S(1): local slice on mesh dim 0"), steps(onPair(Placement.replicate()), onPair(Placement.shard(1))));
        assertEquals(List.of("R->R: no change"), steps(onPair(Placement.replicate()), onPair(Placement.replicate())));
        assertEquals(List.of("cpu->cuda: through the cuda devices of the same ids", "S(0)->R: all-gather on mesh dim 0"),
            steps(onPair(Placement.shard(0)), Sharding.of(PAIR.withKind(DeviceKind.CUDA), Placement.replicate())));
        assertEquals("S(0)RP(max)", GraphDot.placements(List.of(Placement.shard(0), Placement.replicate(),
            Placement.partial(org.dtorch.core.communication.ReduceOpType.MAX))));
    }
}
