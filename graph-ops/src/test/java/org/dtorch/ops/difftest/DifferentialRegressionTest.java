package org.dtorch.ops.difftest;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.api.Index;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.difftest.ProgramRun.Verdict;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The shrunk programs of the failures the random programs found, each a regression test: it runs on four CPU devices in
 * threads and must match torch. The generator's seeds change with the generator; these programs do not.
 */
@Timeout(120)
class DifferentialRegressionTest {
    private static final Placement R = Placement.replicate();
    private static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).timeout(Duration.ofSeconds(60)).build());
    }

    @AfterAll
    static void stop() {
        dt.close();
    }

    private static Program.MeshSpec mesh(int[] shape, long... ids) {
        return new Program.MeshSpec(shape, ids);
    }

    private static void assertPasses(Program p) {
        ProgramRun.Outcome o = ProgramRun.run(dt, p);
        assertEquals(Verdict.PASS, o.verdict(), () -> o + "\n" + p.describe() + PythonRepro.print(p, "cpu", o.toString()));
    }

    /** {@code copy_} broadcasts its source, as torch's does: a 0-d int64 into a float32 vector (it was refused). */
    @Test
    void shouldBroadcastTheSourceOfCopy() {
        assertPasses(new Program(1000002, List.of(mesh(new int[] {2, 2}, 1, 0, 3, 2)), List.of(
            new Source(new long[] {3}, ScalarType.Float, 0, List.of(R, R), 1, 0),
            new Source(new long[] {}, ScalarType.Long, 0, List.of(R, R), 2, 0),
            new Write(Write.Kind.COPY_, new int[] {0, 1}, null, null))));
        assertPasses(new Program(1000248, List.of(mesh(new int[] {4}, 0, 1, 2, 3)), List.of(
            new Source(new long[] {3, 5, 7}, ScalarType.Bool, 0, List.of(Placement.shard(1)), 3, 0),
            new Source(new long[] {3, 1, 7}, ScalarType.Bool, 0, List.of(Placement.shard(0)), 4, 0),
            new Write(Write.Kind.COPY_, new int[] {0, 1}, null, null))));
    }

    /** A value written into {@code t[1:3, None]} has the view's shape, the new axis included (it was refused). */
    @Test
    void shouldWriteAValueWithTheNewAxesOfTheIndex() {
        assertPasses(new Program(1000221, List.of(mesh(new int[] {4}, 2, 0, 1, 3)), List.of(
            new Source(new long[] {4, 3}, ScalarType.Float, 0, List.of(Placement.shard(0)), 5, 0),
            new Source(new long[] {2, 1, 3}, ScalarType.Float, 0, List.of(Placement.shard(2)), 6, 0),
            new Write(Write.Kind.SET_ITEM, new int[] {0, 1}, null, List.of(Index.slice(1L, 3L, 1), Index.none())))));
    }

    /** A convolution whose weight has fewer output channels than devices: empty weight shards (libtorch refused them). */
    @Test
    void shouldConvolveWithEmptyOutputChannelShardsOfTheWeight() {
        assertPasses(new Program(1000239, List.of(mesh(new int[] {4}, 3, 1, 0, 2)), List.of(
            new Source(new long[] {1, 1, 5, 4}, ScalarType.Float, 0, List.of(R), 7, 0),
            new Source(new long[] {2, 1, 2, 2}, ScalarType.Float, 0, List.of(Placement.shard(0)), 8, 0),
            new AtenStep("conv2d", "T,T,n,[i],[i]", Arrays.asList(null, null, null, List.of(1L, 1L), List.of(0L, 0L)), new int[] {0, 1}, 1, false))));
    }

    /**
     * A height-sharded convolution (the halo exchange's kernel, which runs on every device since its peers wait for it)
     * whose weight has fewer output channels than the devices of its mesh dimension: the device with no output channel
     * takes part in the exchange and gives an empty output (libtorch refused its weight of no channel).
     */
    @Test
    void shouldConvolveAHeightShardWithEmptyOutputChannelShardsOfTheWeight() {
        assertPasses(new Program(4001900, List.of(mesh(new int[] {2, 2}, 2, 0, 1, 3)), List.of(
            new Source(new long[] {2, 4, 5, 5}, ScalarType.Float, 0, List.of(Placement.partial(ReduceOpType.MAX), Placement.shard(2)),
                -5151313788983254228L, 0),
            new Source(new long[] {1, 4, 3, 3}, ScalarType.Float, 0, List.of(Placement.shard(0), Placement.shard(1)), 3373048943978269571L, 0),
            new Source(new long[] {1}, ScalarType.Float, 0, List.of(R, R), -2833789434016258384L, 0),
            new AtenStep("conv2d", "T,T,T,[i],[i]", Arrays.asList(null, null, null, List.of(1L, 1L), List.of(1L, 1L)), new int[] {0, 1, 2}, 1,
                false))));
        assertPasses(new Program(4001900, List.of(mesh(new int[] {2, 2}, 1, 3, 2, 0)), List.of(
            new Source(new long[] {1, 2, 6, 4}, ScalarType.Float, 0, List.of(R, Placement.shard(2)), 12, 0),
            new Source(new long[] {1, 2, 3, 3}, ScalarType.Float, 0, List.of(Placement.shard(0), R), 13, 0),
            new AtenStep("conv2d", "T,T,n,[i],[i]", Arrays.asList(null, null, null, List.of(1L, 1L), List.of(1L, 1L)), new int[] {0, 1}, 1,
                false))));
    }

    /** {@code count_nonzero} of a partial sum counts the sum's non-zeros, not the parts' (it kept the partial placement). */
    @Test
    void shouldCountTheNonZerosOfAPartialSumAfterReducingIt() {
        assertPasses(new Program(5000142, List.of(mesh(new int[] {2, 2}, 2, 3, 0, 1)), List.of(
            new Source(new long[] {3, 5}, ScalarType.Float, 0, List.of(Placement.partial(), Placement.shard(1)), 3615791442106025519L, 0),
            new Source(new long[] {2, 5}, ScalarType.Float, 0, List.of(R, R), -2032411961459380017L, 0),
            new AtenStep("linear", "T,T", Arrays.asList(null, null), new int[] {0, 1}, 1, false),
            new AtenStep("count_nonzero", "T,[i]", Arrays.asList(null, List.of(0L)), new int[] {2}, 1, false))));
    }

    /** The mean over no element is NaN, as torch's 0 / 0 (the hand-written mean gave 0). */
    @Test
    void shouldGiveNaNForTheMeanOfNoElement() {
        assertPasses(new Program(5000059, List.of(mesh(new int[] {4}, 3, 2, 0, 1)), List.of(
            new Source(new long[] {2, 0, 2}, ScalarType.Float, 0, List.of(R), 9, 0),
            new MethodStep(MethodStep.Kind.MEAN, new int[] {0}, new MethodStep.Dims(new int[0], false)))));
        assertPasses(new Program(5000059, List.of(mesh(new int[] {4}, 3, 2, 0, 1)), List.of(
            new Source(new long[] {2, 0, 2}, ScalarType.Float, 0, List.of(Placement.shard(2)), 9, 0),
            new MethodStep(MethodStep.Kind.MEAN, new int[] {0}, new MethodStep.Dims(new int[] {1}, true)))));
    }

    /** A 0-d float32 tensor beside a bfloat16 one does not promote it: torch's result type is bfloat16 (it was float32). */
    @Test
    void shouldNotPromoteWithinACategoryForAZeroDimensionalTensor() {
        assertPasses(new Program(10001573, List.of(mesh(new int[] {4}, 3, 0, 2, 1)), List.of(
            new Source(new long[] {1, 1, 7}, ScalarType.BFloat16, 0, List.of(R), 10, 0),
            new Source(new long[] {}, ScalarType.Float, 0, List.of(R), 11, 0),
            new MethodStep(MethodStep.Kind.ADD, new int[] {0, 1}, null),
            new MethodStep(MethodStep.Kind.MEAN, new int[] {2}, new MethodStep.Dims(new int[] {1}, false)))));
    }
}
