package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.testing.DotSyntax;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code DTorch.dumpGraph} on a 2-device mesh in thread mode: the DOT text of small programs compared exactly (operator
 * ids count from 1 in a fresh runtime) and checked by {@link DotSyntax}; explicit and implicit redistributions show
 * their plans (a copy between shardings too); each dump starts a new window.
 */
@Timeout(120)
class GraphDumpTest {
    private static final String HEADER = "// Edges carry the placements of the tensor they pass.\n"
        + "digraph dtorch {\n  node [shape=box, fontname=\"monospace\"];\n  edge [fontname=\"monospace\"];\n";

    @TempDir
    Path dir;

    private static DTorch twoDevices() {
        return DTorch.init(DTorchOptions.builder().devices(2).timeout(Duration.ofSeconds(60)).build());
    }

    private String dump(DTorch dt, String name) throws Exception {
        Path file = dir.resolve(name);
        dt.dumpGraph(file);
        String dot = Files.readString(file);
        DotSyntax.check(dot);
        return dot;
    }

    private static String header(int operators) {
        return "// The logical graph of a DTorch program: the " + operators
            + " operators added since the runtime started or the last dump.\n" + HEADER;
    }

    @Test
    void shouldDumpAMatmulARedistributeAndASumWithPlacementsAndThePlan() throws Exception {
        try (DTorch dt = twoDevices()) {
            DTensor a = dt.ones(new long[] {4, 3}, dt.defaultMesh(), Placement.shard(0));
            DTensor b = dt.ones(new long[] {3, 4}, dt.defaultMesh(), Placement.replicate());
            DTensor sum = a.matmul(b).redistribute(Placement.replicate()).sum();

            assertEquals(header(5)
                + "  op1 [label=\"ones#1\\nfloat32[4, 3]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op2 [label=\"ones#2\\nfloat32[3, 4]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op3 [label=\"matmul#3\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op1 -> op3 [label=\"S(0)\"];\n"
                + "  op2 -> op3 [label=\"R\"];\n"
                + "  op4 [label=\"redistribute#4\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])\\nS(0)->R: all-gather on mesh dim 0\","
                + " style=filled, fillcolor=\"#fde0c5\"];\n"
                + "  op3 -> op4 [label=\"S(0)\"];\n"
                + "  op5 [label=\"sum#5\\nfloat32[]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op4 -> op5 [label=\"R\"];\n"
                + "}\n", dump(dt, "program.dot"));

            assertEquals(48.0f, sum.toTorch().item_float(), "the program still runs: 4 x 4 entries of 3");
            assertEquals(header(2)
                + "  t5 [label=\"%5 (earlier)\\nfloat32[]\\nDeviceMesh(cpu, [0, 1])\", shape=ellipse, style=dashed];\n"
                + "  op6 [label=\"redistribute#6\\nfloat32[]\\nDeviceMesh(cpu, [0, 1]) -> DeviceMesh(cpu, [0])"
                + "\\ntransfer to DeviceMesh(cpu, [0]): 1 piece\", style=filled, fillcolor=\"#fde0c5\"];\n"
                + "  t5 -> op6 [label=\"R\"];\n"
                + "  op7 [label=\"get_tensor#7\\nDeviceMesh(cpu, [0])\"];\n"
                + "  op6 -> op7 [label=\"R\"];\n"
                + "}\n", dump(dt, "value.dot"), "the second dump holds what toTorch() added since the first");
        }
    }

    @Test
    void shouldShowTheRedistributionsAStrategyAndACopyMakeAndThePartialSumLeft() throws Exception {
        try (DTorch dt = twoDevices()) {
            DTensor x = dt.ones(new long[] {4, 4}, dt.defaultMesh(), Placement.shard(1));
            DTensor y = dt.ones(new long[] {4, 4}, dt.defaultMesh(), Placement.shard(1));
            x.matmul(y).mul(2.0);
            x.copy_(dt.ones(new long[] {4, 4}, dt.defaultMesh(), Placement.replicate()));

            String dot = dump(dt, "implicit.dot");
            assertEquals(header(7)
                + "  op1 [label=\"ones#1\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op2 [label=\"ones#2\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op3 [label=\"redistribute (implicit, for aten::matmul)#3\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])"
                + "\\nS(1)->S(0): all-to-all on mesh dim 0\","
                + " style=filled, fillcolor=\"#fde0c5\"];\n"
                + "  op2 -> op3 [label=\"S(1)\"];\n"
                + "  op4 [label=\"matmul#4\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op1 -> op4 [label=\"S(1)\"];\n"
                + "  op3 -> op4 [label=\"S(0)\"];\n"
                + "  op5 [label=\"mul#5\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op4 -> op5 [label=\"P(sum)\"];\n"
                + "  op6 [label=\"ones#6\\nfloat32[4, 4]\\nDeviceMesh(cpu, [0, 1])\"];\n"
                + "  op7 [label=\"copy_#7\\nDeviceMesh(cpu, [0, 1])\\nR->S(1): local slice on mesh dim 0\"];\n"
                + "  op1 -> op7 [label=\"S(1)\"];\n"
                + "  op6 -> op7 [label=\"R\"];\n"
                + "}\n", dot);
            assertEquals(List.of("op1", "op2", "op3", "op4", "op5", "op6", "op7"), DotSyntax.check(dot));
        }
    }
}
