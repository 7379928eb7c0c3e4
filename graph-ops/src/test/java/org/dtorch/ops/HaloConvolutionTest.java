package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * 2-D convolutions of height-sharded inputs with a halo exchange ({@link HaloConvolution}) against libtorch's convolution
 * of the whole tensor, exactly (integer-valued float32, so that the order of the sums cannot matter): 7 rows over 2, 3
 * and 4 devices and a 2x2 mesh, and 2 and 3 rows over 4 devices (empty shares), the output sharded as the input, one
 * point-to-point batch per device and no all-gather; channels-last kept; and the cases no halo serves, which still gather
 * and equal torch. {@link GenericOpsInProcessesTest}
 * runs {@link #checkHaloCases} with worker processes.
 */
@Timeout(120)
class HaloConvolutionTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    static final Placement ROWS = Placement.shard(2);
    private static final long HEIGHT = 7;

    /** Rows over 2, 3 and 4 devices, and over either dimension of a 2x2 mesh (with the batch on the other). */
    static final Layout[] LAYOUTS = {new Layout(new int[] {2}, ROWS), new Layout(new int[] {3}, ROWS), new Layout(new int[] {4}, ROWS),
        new Layout(new int[] {2, 2}, R, ROWS), new Layout(new int[] {2, 2}, ROWS, Placement.shard(0))};

    /** One convolution: its call, the weight's shape, whether it takes a bias, and the halo it needs in rows. */
    private record Conv(String what, AtenCall call, long[] weight, boolean bias, int halo) {
    }

    /** A mesh and the input's placements on it. */
    record Layout(int[] mesh, Placement... placements) {
        @Override
        public String toString() {
            return Arrays.toString(mesh) + " " + Arrays.toString(placements);
        }
    }

    /** Small integers as float32 (rounded normal samples times 3), so that every convolution here is exact. */
    private static Tensor integers(long... shape) {
        try (Tensor r = torch.randn(shape); Scalar three = new Scalar(3.0); Tensor scaled = r.mul(three)) {
            return scaled.round();
        }
    }

    /** Convolutions whose output height is the input's: the halo serves them on any mesh, whatever the shares. */
    private static List<Conv> haloCases() {
        List<Long> one = List.of(1L, 1L);
        return List.of(
            new Conv("k3 p1 bias", call("conv2d", "T,T,T,[i],[i],[i],i", null, null, null, one, one, one, 1L), new long[] {5, 4, 3, 3}, true, 1),
            new Conv("k5 p2, width unpadded", call("conv2d", "T,T,n,[i],[i]", null, null, null, one, List.of(2L, 0L)), new long[] {3, 4, 5, 5}, false, 2),
            new Conv("same, width dilated", call("conv2d", "T,T,n|padding=s|dilation=[i]", null, null, null, "same", List.of(1L, 2L)),
                new long[] {3, 4, 3, 3}, false, 1),
            new Conv("groups 2, width stride 2", call("conv2d", "T,T,T,[i],[i],[i],i", null, null, null, List.of(1L, 2L), one, one, 2L),
                new long[] {6, 2, 3, 3}, true, 1),
            new Conv("k3 dilated 2 p2", call("conv2d", "T,T,n,[i],[i],[i]", null, null, null, one, List.of(2L, 1L), List.of(2L, 1L)),
                new long[] {3, 4, 3, 3}, false, 2),
            new Conv("k1 (no halo)", call("conv2d", "T,T,T", null, null, null), new long[] {3, 4, 1, 1}, true, 0),
            new Conv("convolution", call("convolution", "T,T,T,[i],[i],[i],b,[i],i", null, null, null, one, one, one, false,
                List.of(0L, 0L), 1L), new long[] {3, 4, 3, 3}, true, 1));
    }

    /**
     * Every halo case on 7 rows sharded as each of {@code layouts} says (over 2, 3 or 4 devices, or one dimension of a
     * 2x2 mesh), against torch exactly; the output keeps the input's placements, a halo taller than the smallest share
     * included (one row over 4 devices: a 2-row halo reaches past the neighbour). With {@code counts}, the runtime's
     * collective counter (threads only) sees one point-to-point batch per device of a halo and no all-gather.
     */
    static void checkHaloCases(DTorch runtime, boolean counts, Layout... layouts) {
        for (Layout layout : layouts) {
            DeviceMesh mesh = runtime.initDeviceMesh(layout.mesh());
            for (Conv c : haloCases()) {
                String what = c.what() + " on " + layout;
                Map<CollectiveKind, Long> before = runtime.runtime().groups().collectiveCounter().snapshot();
                List<Placement> got = check(runtime, c, mesh, layout.placements(), what);
                assertEquals(List.of(layout.placements()), got, what);
                if (counts) {
                    Map<CollectiveKind, Long> after = runtime.runtime().groups().collectiveCounter().snapshot();
                    long p2p = after.get(CollectiveKind.POINT_TO_POINT) - before.get(CollectiveKind.POINT_TO_POINT);
                    long gathers = after.get(CollectiveKind.ALL_GATHER) - before.get(CollectiveKind.ALL_GATHER);
                    assertEquals(c.halo() > 0 ? mesh.count() : 0, p2p, what + ": one point-to-point batch per device");
                    assertEquals(0, gathers, what + ": the input is not gathered");
                }
            }
        }
    }

    /**
     * {@code c} on a random integer-valued {@code [2, 4, 7, 6]} input placed so on {@code mesh} (weight and bias
     * replicated), against torch on the whole tensors; the output's placements, read before the result is gathered.
     */
    private static List<Placement> check(DTorch runtime, Conv c, DeviceMesh mesh, Placement[] placements, String what) {
        return check(runtime, c, mesh, placements, what, HEIGHT);
    }

    /** As {@link #check(DTorch, Conv, DeviceMesh, Placement[], String)}, on an input {@code height} rows tall. */
    private static List<Placement> check(DTorch runtime, Conv c, DeviceMesh mesh, Placement[] placements, String what, long height) {
        List<Tensor> locals = new ArrayList<>(List.of(integers(2, 4, height, 6), integers(c.weight())));
        if (c.bias()) {
            locals.add(integers(c.weight()[0]));
        }
        List<DTensor> inputs = new ArrayList<>();
        try {
            inputs.add(runtime.tensor(locals.getFirst(), mesh, placements));
            for (Tensor t : locals.subList(1, locals.size())) {
                inputs.add(runtime.tensor(t, mesh, Collections.nCopies(placements.length, R).toArray(Placement[]::new)));
            }
            runtime.sync();
            try (DTensor out = runtime.aten(c.call(), inputs.toArray(DTensor[]::new)).getFirst()) {
                runtime.sync();
                List<Placement> got = out.placements();
                List<Tensor> want = c.call().call(locals);
                try (Tensor expected = want.getFirst(); Tensor value = out.toTorch()) {
                    assertTrue(torch.equal(value, expected), what + ": got " + value + "\nwant " + expected);
                }
                return got;
            }
        } finally {
            inputs.forEach(DTensor::close);
            locals.forEach(Tensor::close);
        }
    }

    @Test
    void shouldConvolveHeightShardsWithHalosLikeTorch() {
        checkHaloCases(dt, true, LAYOUTS);
    }

    /**
     * Heights shorter than the devices (2 and 3 rows over 4: the last devices hold no row): the halo still serves, its
     * rows coming past the empty shares, the output keeps the height shards, and no all-gather runs.
     */
    @Test
    void shouldKeepHeightShardsWithEmptySharesThroughTheHalo() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        for (long height : new long[] {2, 3}) {
            for (Conv c : haloCases()) {
                String what = c.what() + " on " + height + " rows over 4 devices";
                Map<CollectiveKind, Long> before = dt.runtime().groups().collectiveCounter().snapshot();
                assertEquals(List.of(ROWS), check(dt, c, line, new Placement[] {ROWS}, what, height), what);
                Map<CollectiveKind, Long> after = dt.runtime().groups().collectiveCounter().snapshot();
                assertEquals(before.get(CollectiveKind.ALL_GATHER), after.get(CollectiveKind.ALL_GATHER), what + ": the input is not gathered");
            }
        }
    }

    @Test
    void shouldGatherWhereNoHaloServesAndStillEqualTorch() {
        List<Long> one = List.of(1L, 1L);
        List<Conv> cases = List.of(
            new Conv("stride 2 in height", call("conv2d", "T,T,n,[i],[i]", null, null, null, List.of(2L, 1L), one), new long[] {3, 4, 3, 3}, false, -1),
            new Conv("k3 unpadded (output shorter)", call("conv2d", "T,T", null, null), new long[] {3, 4, 3, 3}, false, -1),
            new Conv("even kernel same (asymmetric)", call("conv2d", "T,T,n|padding=s", null, null, null, "same"), new long[] {3, 4, 4, 3}, false, -1),
            new Conv("k3 p1 dilated 2 (output shorter)", call("conv2d", "T,T,n,[i],[i],[i]", null, null, null, one, one, List.of(2L, 1L)),
                new long[] {3, 4, 3, 3}, false, -1),
            new Conv("transposed", call("convolution", "T,T,n,[i],[i],[i],b,[i],i", null, null, null, one, one, one, true, List.of(0L, 0L), 1L),
                new long[] {4, 3, 3, 3}, false, -1));
        DeviceMesh line = dt.initDeviceMesh(new int[] {2});
        for (Conv c : cases) {
            assertEquals(List.of(R), check(dt, c, line, new Placement[] {ROWS}, c.what()), c.what());
        }
        DeviceMesh square = dt.initDeviceMesh(new int[] {2, 2});
        Conv same = haloCases().getFirst();
        assertEquals(List.of(R, R), check(dt, same, square, new Placement[] {ROWS, ROWS}, "nested height shards"), "nested height shards");
    }

    @Test
    void shouldDecideTheHaloOnTheRowsMeshDimensionOnly() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor x = integers(2, 4, HEIGHT, 6); Tensor w = integers(6, 4, 3, 3); Tensor b = integers(6);
             DTensor rows = dt.tensor(x, mesh, Placement.shard(0), ROWS); DTensor weight = dt.tensor(w, mesh, Placement.shard(0), Placement.shard(0));
             DTensor bias = dt.tensor(b, mesh, R, R)) {
            AtenSpec spec = new AtenSpec(haloCases().getFirst().call());
            ShardingStrategy.Decision d = spec.decide(List.of(rows.meta(), weight.meta(), bias.meta()));
            assertEquals(List.of(List.of(Placement.shard(0), ROWS), List.of(R, R), List.of(R, R)), d.inputs(),
                "batch on one dimension, the halo on the other; the weight gathered");
            assertEquals(List.of(List.of(Placement.shard(0), ROWS)), d.outputs());
            assertTrue(spec.communicates(), "a halo kernel communicates");
            assertTrue(!new AtenSpec(call("conv1d", "T,T", null, null)).communicates(), "a 1-D convolution never does");
            assertTrue(spec.strategy().legal().contains("S(2) (height"), spec.strategy().legal());
        }
    }

    /**
     * A device whose input failed upstream still joins the halo exchange (on placeholders), so its neighbours, already
     * waiting in the exchange (device 1 fails a second late), fail with the cause at once instead of at the group's
     * deadline, and the runtime stays usable.
     */
    @Test
    void shouldFailPromptlyWhenOneDevicesInputFailedUpstream() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {3});
        Conv c = haloCases().getFirst();
        try (Tensor x = integers(2, 4, HEIGHT, 6); Tensor w = integers(c.weight()); Tensor b = integers(c.weight()[0]);
             DTensor rows = dt.tensor(x, mesh, ROWS); DTensor weight = dt.tensor(w, mesh, R); DTensor bias = dt.tensor(b, mesh, R);
             DTensor late = dt.apply(new TestOps.StallOn(1, 1000, false), rows); DTensor broken = dt.apply(new TestOps.FailOn(1), late);
             DTensor out = dt.aten(c.call(), broken, weight, bias).getFirst()) {
            long start = System.nanoTime();
            FutureFailedException e = assertThrows(FutureFailedException.class, () -> out.toTorchAsync().get());
            long seconds = (System.nanoTime() - start) / 1_000_000_000L;
            assertTrue(seconds < 20 && e.getMessage().contains("boom on purpose"), seconds + " s: " + e.getMessage());
        }
        checkHaloCases(dt, true, new Layout(new int[] {3}, ROWS));
    }

    @Test
    void shouldKeepChannelsLast() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {3});
        AtenCall channelsLast = call("clone", "T|memory_format=m", null, torch.MemoryFormat.ChannelsLast);
        try (Tensor x = integers(2, 4, HEIGHT, 6); Tensor w = integers(5, 4, 3, 3); Tensor b = integers(5);
             DTensor contiguous = dt.tensor(x, mesh, ROWS); DTensor rows = dt.aten(channelsLast, contiguous).getFirst();
             DTensor weight = dt.tensor(w, mesh, R); DTensor bias = dt.tensor(b, mesh, R);
             DTensor out = dt.aten(haloCases().getFirst().call(), rows, weight, bias).getFirst();
             DTensor checked = dt.apply(new TestOps.RequireChannelsLast(), out); Tensor value = checked.toTorch();
             Tensor want = haloCases().getFirst().call().call(List.of(x, w, b)).getFirst()) {
            assertEquals(List.of(ROWS), out.placements());
            assertTrue(torch.equal(value, want), "channels-last: got " + value + "\nwant " + want);
        }
    }
}
