package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The local-shard API: {@code fromLocal} takes one local tensor per device in the mesh's device order and checks them
 * against the layout before anything runs; {@code toLocal} gives each device's local tensor back and {@code fullTensor}
 * the whole one, against slices and sums made with torch on one device, on 1-d and 2-d meshes with sharded (uneven
 * included), replicated and partial placements. In thread mode both directions share memory with the caller's tensors;
 * {@link LocalShardsInProcessesTest} runs the same with worker processes, where they are copies.
 */
@Timeout(120)
class LocalShardsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();

    /** True when the runtime's devices keep the caller's tensors by reference (thread mode). */
    boolean aliases() {
        return true;
    }

    /** Whether the runtime under test runs its devices in worker processes. */
    boolean processes() {
        return false;
    }

    static void assertEqual(String what, Tensor want, Tensor got) {
        assertEquals(Arrays.toString(want.sizes().vec().get()), Arrays.toString(got.sizes().vec().get()), what);
        assertEquals(want.scalar_type().intern(), got.scalar_type().intern(), what);
        assertTrue(torch.equal(want.contiguous(), got.contiguous()), what + ": got " + got + ", want " + want);
    }

    /** Rows {@code [from, from + n)} of dimension {@code dim}, copied. */
    static Tensor part(Tensor t, int dim, long from, long n) {
        try (Tensor view = t.narrow(dim, from, n)) {
            return view.clone();
        }
    }

    @Test
    void shouldMakeATensorOfUnevenShardsAndGiveThemBack() {
        DeviceMesh line = dt.mesh(0, 1, 2, 3);
        try (Tensor x = torch.randn(new long[] {10, 3})) {
            // The balanced split: 10 over 4 is 3, 3, 2, 2.
            List<Tensor> locals = List.of(part(x, 0, 0, 3), part(x, 0, 3, 3), part(x, 0, 6, 2), part(x, 0, 8, 2));
            try (DTensor d = dt.fromLocal(locals, line, Placement.shard(0)); Tensor whole = d.toTorch(); Tensor full = d.fullTensor()) {
                assertArrayEquals(new long[] {10, 3}, d.shape());
                assertEquals(List.of(Placement.shard(0)), d.placements());
                assertEqual("to_torch", x, whole);
                assertEqual("full_tensor", x, full);
                List<Tensor> back = d.toLocal();
                assertEquals(4, back.size());
                for (int i = 0; i < 4; i++) {
                    assertEqual("to_local of device " + i, locals.get(i), back.get(i));
                }
                back.forEach(Tensor::close);
            }
            try (DTensor given = dt.fromLocal(locals, line, new long[] {10, 3}, Placement.shard(0)); Tensor whole = given.toTorch()) {
                assertEqual("with the shape given", x, whole);
            }
            locals.forEach(Tensor::close);
        }
    }

    @Test
    void shouldTakeShardsReplicasAndPartialValuesOnATwoDimensionalMesh() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(new long[] {5, 6})) {
            // [S(0), S(1)]: device (i, j) holds rows i (3, 2) and columns j (3, 3).
            List<Tensor> blocks = new ArrayList<>();
            for (long id : grid.deviceIds()) {
                int[] c = grid.coordinates(id);
                try (Tensor rows = part(x, 0, c[0] == 0 ? 0 : 3, c[0] == 0 ? 3 : 2)) {
                    blocks.add(part(rows, 1, c[1] * 3L, 3));
                }
            }
            try (DTensor d = dt.fromLocal(blocks, grid, Placement.shard(0), Placement.shard(1)); Tensor whole = d.toTorch()) {
                assertArrayEquals(new long[] {5, 6}, d.shape());
                assertEqual("[S(0), S(1)]", x, whole);
                List<Tensor> back = d.toLocal();
                for (int i = 0; i < 4; i++) {
                    assertEqual("to_local [S(0), S(1)] of device " + i, blocks.get(i), back.get(i));
                }
                back.forEach(Tensor::close);
            }
            // [P(sum), S(1)]: the two rows of the mesh hold partial values whose sum is the tensor.
            try (Tensor a = torch.randn(new long[] {5, 6}); Tensor b = x.sub(a)) {
                List<Tensor> partials = new ArrayList<>();
                for (long id : grid.deviceIds()) {
                    int[] c = grid.coordinates(id);
                    partials.add(part(c[0] == 0 ? a : b, 1, c[1] * 3L, 3));
                }
                try (DTensor d = dt.fromLocal(partials, grid, Placement.partial(), Placement.shard(1)); Tensor whole = d.toTorch()) {
                    assertEquals(List.of(Placement.partial(), Placement.shard(1)), d.placements());
                    assertTrue(torch.allclose(x, whole, 1e-5, 1e-6, false), "the partial values summed: " + whole + " vs " + x);
                    List<Tensor> back = d.toLocal();
                    for (int i = 0; i < 4; i++) {
                        assertEqual("to_local gives the partial value of device " + i, partials.get(i), back.get(i));
                    }
                    back.forEach(Tensor::close);
                }
                partials.forEach(Tensor::close);
            }
            // [R, S(0)]: replicas along the first mesh dimension.
            List<Tensor> halves = new ArrayList<>();
            for (long id : grid.deviceIds()) {
                halves.add(part(x, 0, grid.coordinates(id)[1] == 0 ? 0 : 3, grid.coordinates(id)[1] == 0 ? 3 : 2));
            }
            try (DTensor d = dt.fromLocal(halves, grid, null, true, R, Placement.shard(0)); Tensor whole = d.toTorch()) {
                assertEqual("[R, S(0)]", x, whole);
            }
            blocks.forEach(Tensor::close);
            halves.forEach(Tensor::close);
        }
    }

    @Test
    void shouldGiveEveryDeviceItsReplicaOrShardThroughToLocal() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.arange(new Scalar(24)).reshape(4, 6); DTensor d = dt.tensor(x, grid, R, Placement.shard(1))) {
            List<Tensor> back = d.toLocal();
            for (int i = 0; i < 4; i++) {
                int column = grid.coordinates(grid.deviceIds().get(i))[1];
                try (Tensor want = part(x, 1, column * 3L, 3)) {
                    assertEqual("to_local [R, S(1)] of device " + i, want, back.get(i));
                }
            }
            back.forEach(Tensor::close);
        }
    }

    @Test
    void shouldAcceptZeroSizeLocalTensorsWhereTheLayoutSaysSo() {
        DeviceMesh line = dt.mesh(0, 1, 2, 3);
        List<Tensor> empty = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            empty.add(torch.zeros(new long[] {0, 2}));
        }
        try (DTensor d = dt.fromLocal(empty, line, Placement.shard(1)); DTensor sum = d.sum(0); Tensor sums = sum.toTorch()) {
            assertArrayEquals(new long[] {0, 8}, d.shape());
            assertEqual("the sum over no rows", torch.zeros(new long[] {8}), sums);
            try (Tensor whole = d.toTorch()) {
                assertArrayEquals(new long[] {0, 8}, whole.sizes().vec().get());
            }
            List<Tensor> back = d.toLocal();
            assertArrayEquals(new long[] {0, 2}, back.get(3).sizes().vec().get());
            back.forEach(Tensor::close);
        }
        empty.forEach(Tensor::close);
    }

    @Test
    void shouldShareMemoryWithTheCallersTensorsInThreadMode() {
        DeviceMesh line = dt.mesh(0, 1);
        try (Tensor a = torch.zeros(new long[] {2, 3}); Tensor b = torch.zeros(new long[] {2, 3})) {
            DTensor d = dt.fromLocal(List.of(a, b), line, Placement.shard(0));
            try (Tensor before = d.toTorch(); Scalar one = new Scalar(1.0)) {
                assertEquals(0.0, before.sum().item_double());
                b.add_(one); // after from_local: the device kept a reference, as PyTorch's from_local shares storage
                try (Tensor after = d.toTorch()) {
                    assertEquals(aliases() ? 6.0 : 0.0, after.sum().item_double(), "a later write to a given tensor");
                }
                List<Tensor> locals = d.toLocal();
                locals.getFirst().add_(one); // through to_local: the worker's shard itself in thread mode
                try (Tensor after = d.toTorch()) {
                    assertEquals(aliases() ? 12.0 : 0.0, after.sum().item_double(), "an in-place change through to_local");
                }
                locals.forEach(Tensor::close);
            }
            d.close();
        }
    }

    @Test
    void shouldGiveEveryDeviceMemoryOfItsOwnWhenOneTensorIsGivenTwice() {
        DeviceMesh line = dt.mesh(0, 1);
        try (Tensor x = torch.randn(new long[] {4, 3}); Tensor top = x.narrow(0, 0, 2); Tensor bottom = x.narrow(0, 2, 2)) {
            // One tensor for both replicas: the first device keeps it, the second gets a copy.
            try (DTensor replicas = dt.fromLocal(List.of(x, x), line, R)) {
                List<Tensor> back = replicas.toLocal();
                assertEqual("replica 0", x, back.get(0));
                assertEqual("replica 1", x, back.get(1));
                assertEquals(aliases(), back.get(0).data_ptr().address() == x.data_ptr().address(), "the first device keeps the given tensor");
                assertTrue(back.get(1).data_ptr().address() != x.data_ptr().address(), "the second device owns a copy");
                back.forEach(Tensor::close);
            }
            // Views of disjoint parts of one tensor share nothing: both stay references in thread mode.
            try (DTensor halves = dt.fromLocal(List.of(top, bottom), line, Placement.shard(0)); Tensor whole = halves.toTorch()) {
                assertEqual("halves", x, whole);
                List<Tensor> back = halves.toLocal();
                assertEquals(aliases(), back.get(1).data_ptr().address() == bottom.data_ptr().address(), "a disjoint view stays a reference");
                back.forEach(Tensor::close);
            }
        }
    }

    @Test
    void shouldRefuseABadLocalShapeBeforeAnythingRunsNamingTheDevice() {
        DeviceMesh line = dt.mesh(0, 1, 2, 3);
        List<Tensor> locals = List.of(torch.zeros(new long[] {3, 4}), torch.zeros(new long[] {3, 4}), torch.zeros(new long[] {3, 4}),
            torch.zeros(new long[] {2, 4}));
        dt.runtime().graph().history().drain();
        // Inferred: 3 + 3 + 3 + 2 = 11 rows, whose balanced split is 3, 3, 3, 2: fine. Given 10 rows, device 2 is wrong.
        IllegalArgumentException shape = assertThrows(IllegalArgumentException.class,
            () -> dt.fromLocal(locals, line, new long[] {10, 4}, Placement.shard(0)));
        assertEquals("from_local: the local tensor of device 2 has shape [3, 4]; the layout of shape [10, 4] under [S(0)] on " + line
            + " gives it [2, 4]", shape.getMessage());
        List<Tensor> skewed = List.of(locals.get(3), locals.get(0), locals.get(1), locals.get(2));
        IllegalArgumentException inferred = assertThrows(IllegalArgumentException.class, () -> dt.fromLocal(skewed, line, Placement.shard(0)));
        assertTrue(inferred.getMessage().startsWith("from_local: the local tensor of device 0 has shape [2, 4]"), inferred.getMessage());
        assertTrue(inferred.getMessage().contains("gives it [3, 4] (the global shape was inferred"), inferred.getMessage());
        IllegalArgumentException count = assertThrows(IllegalArgumentException.class,
            () -> dt.fromLocal(locals.subList(0, 3), line, Placement.shard(0)));
        assertTrue(count.getMessage().contains("3 local tensors for the 4 devices"), count.getMessage());
        try (Tensor ints = torch.zeros(new long[] {3, 4}, new org.bytedeco.pytorch.TensorOptions(ScalarType.Long))) {
            List<Tensor> mixed = List.of(locals.get(0), locals.get(1), ints, locals.get(3));
            IllegalArgumentException dtype = assertThrows(IllegalArgumentException.class, () -> dt.fromLocal(mixed, line, Placement.shard(0)));
            assertTrue(dtype.getMessage().startsWith("from_local: the local tensor of device 2 is int64[3, 4]"), dtype.getMessage());
        }
        assertEquals(List.of(), dt.runtime().graph().history().drain().operators(), "nothing was queued");
        try (DTensor fine = dt.fromLocal(locals, line, Placement.shard(0))) {
            assertArrayEquals(new long[] {11, 4}, fine.shape());
        }
        locals.forEach(Tensor::close);
    }

    @Test
    void shouldCompareReplicasOnlyWhenAsked() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor x = torch.randn(new long[] {4, 2}); Tensor y = x.add(new Scalar(1.0))) {
            // [R, S(0)]: devices 0 and 2 hold one half, 1 and 3 the other; device 3 differs from device 1.
            List<Tensor> locals = List.of(part(x, 0, 0, 2), part(x, 0, 2, 2), part(x, 0, 0, 2), part(y, 0, 2, 2));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> dt.fromLocal(locals, grid, null, true, R, Placement.shard(0)));
            assertTrue(e.getMessage().startsWith("from_local (replica check): the local tensor of device 3 differs from device 1's, its replica "
                + "along mesh dimension 0"), e.getMessage());
            // Taken as given without the check: each device keeps what it was given.
            try (DTensor d = dt.fromLocal(locals, grid, R, Placement.shard(0))) {
                List<Tensor> back = d.toLocal();
                assertEqual("device 3 keeps its own replica", locals.get(3), back.get(3));
                back.forEach(Tensor::close);
            }
            locals.forEach(Tensor::close);
        }
    }

    @Test
    void shouldNameTheDevicesThatDidNotAnswerWhenToLocalTimesOut() {
        try (DTorch two = TestOps.twoDevices(processes(), Duration.ofSeconds(1))) {
            DTensor x = two.ones(new long[] {4}, two.defaultMesh(), Placement.shard(0));
            assertTrue(two.syncFuture().waitFor(Duration.ofSeconds(60)), "the workers are up: what follows only waits for the stalled kernel");
            DTensor slow = two.apply(new TestOps.StallOn(1, 3_000, false), x);
            CommTimeoutException e = assertThrows(CommTimeoutException.class, slow::toLocal);
            assertTrue(e.getMessage().startsWith("to_local of " + slow + ": timed out after 1 s"), e.getMessage());
            assertTrue(e.getMessage().contains("devices [1] (of [0, 1])"), e.getMessage());
            assertFalse(e.getMessage().contains("[0] "), e.getMessage());
        }
    }
}
