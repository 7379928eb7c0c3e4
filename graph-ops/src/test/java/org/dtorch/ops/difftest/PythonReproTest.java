package org.dtorch.ops.difftest;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.Index;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;

/**
 * The reproduction printer on a tiny program that takes every kind of step (an input with a partial placement, a method,
 * an ATen operator of two outputs, a cross-mesh move, writes). The printed script is checked in as the Python test
 * {@code python-facade/src/test/python/test_difftest_repro.py}, which the Python facade's script tests run under
 * {@code ./dtorch run}; this test holds the printer to that text, so the printer's output is a script that runs.
 */
class PythonReproTest {
    private static final Path CHECKED_IN = Path.of("..", "python-facade", "src", "test", "python", "test_difftest_repro.py");

    static Program tiny() {
        Program.MeshSpec line = new Program.MeshSpec(new int[] {2}, new long[] {1, 0});
        Program.MeshSpec square = new Program.MeshSpec(new int[] {2, 2}, new long[] {3, 2, 1, 0});
        return new Program(7, List.of(line, square), List.of(
            new Source(new long[] {4, 3}, ScalarType.Float, 0, List.of(Placement.shard(0)), 11, 0),
            new Source(new long[] {3}, ScalarType.Long, 0, List.of(Placement.partial()), 12, 0),
            new MethodStep(MethodStep.Kind.ADD, new int[] {0, 1}, null),
            new AtenStep("split", "T,i|dim=i", java.util.Arrays.asList(null, 3L, 0L), new int[] {2}, 2, true),
            new AtenStep("amax", "T|dim=[i]|keepdim=b", java.util.Arrays.asList(null, List.of(1L), true), new int[] {3}, 1, false),
            new Move(new int[] {4}, 1, List.of(Placement.shard(1), Placement.replicate())),
            new Write(Write.Kind.ADD_S_, new int[] {5}, 1.5, null),
            new Write(Write.Kind.SET_ITEM, new int[] {5}, -2L, List.of(Index.slice(1L, null, 1), Index.at(0)))));
    }

    @Test
    void shouldPrintTheScriptThePythonTestsRun() throws IOException {
        String printed = PythonRepro.print(tiny(), "cpu", "");
        if (Boolean.getBoolean("dtorch.difftest.writeRepro")) {
            Files.writeString(CHECKED_IN, printed);
        }
        assertEquals(Files.readString(CHECKED_IN), printed, "the printer's output differs from " + CHECKED_IN
            + "; rerun with -Ddtorch.difftest.writeRepro=true to rewrite it, then run it with ./dtorch run");
    }
}
