package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.LongOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.Index;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.testing.TestTensors;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * In-place operators, box writes ({@code t[box] = v}) and views that share memory with their base, against torch on one
 * device: the written tensor keeps its placements, every device writes only its own shard's part, a write into a view
 * shows in its base and the other way round (directly where the view runs on every shard where it is, by write-back and
 * refresh where it had to move its base), and {@code toTorch()} is what the tensor held when it was asked.
 */
@Timeout(120)
class InPlaceWritesTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    private static final Placement P = Placement.partial();

    private static Tensor base(long... shape) {
        return TestTensors.pattern(shape, ScalarType.Float, 1, 11, -5);
    }

    private static DTensor make(Tensor t, DeviceMesh mesh, Placement... placements) {
        boolean partial = false;
        for (Placement p : placements) {
            partial |= p.isPartial();
        }
        if (!partial) {
            return dt.tensor(t, mesh, placements);
        }
        Placement[] whole = new Placement[placements.length];
        for (int i = 0; i < whole.length; i++) {
            whole[i] = placements[i].isPartial() ? R : placements[i];
        }
        return dt.tensor(t, mesh, whole).redistribute(placements);
    }

    private static void assertValue(Tensor want, DTensor got, String what) {
        try (Tensor value = got.toTorch()) {
            assertNull(OperatorsTest.compare(want, value), what);
        }
    }

    private static List<Placement[]> oneDim() {
        return List.of(new Placement[] {R}, new Placement[] {S0}, new Placement[] {S1}, new Placement[] {P});
    }

    @Test
    void shouldAddMultiplySubtractAndDivideInPlaceForEveryPairOfPlacementsKeepingTheWrittenOnes() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = base(6, 5); Tensor b = TestTensors.pattern(new long[] {6, 5}, ScalarType.Float, 3, 7, 1)) {
            for (Placement[] pa : oneDim()) {
                for (Placement[] pb : oneDim()) {
                    String what = List.of(pa).toString() + " op= " + List.of(pb);
                    try (Tensor sum = a.add(b); Tensor product = a.mul(b); Tensor difference = a.sub(b)) {
                        DTensor x = make(a, line, pa);
                        assertSame(x, x.add_(make(b, line, pb)));
                        assertEquals(List.of(pa), x.placements(), what);
                        assertValue(sum, x, "add_ " + what);
                        DTensor y = make(a, line, pa);
                        y.mul_(make(b, line, pb));
                        assertEquals(List.of(pa), y.placements(), what);
                        assertValue(product, y, "mul_ " + what);
                        DTensor z = make(a, line, pa);
                        z.sub_(make(b, line, pb));
                        assertValue(difference, z, "sub_ " + what);
                    }
                }
            }
            DTensor q = make(a, line, P);
            q.mul_(2.0).add_(1.0);
            try (Scalar two = new Scalar(2.0); Scalar one = new Scalar(1.0); Tensor doubled = a.mul(two); Tensor want = doubled.add(one)) {
                assertEquals(List.of(P), q.placements());
                assertValue(want, q, "a partial sum times a number plus a number, in place");
            }
        }
    }

    @Test
    void shouldWriteInPlaceOnATwoByTwoMeshWithNestedShards() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        Placement[][] layouts = {{S0, S0}, {S0, S1}, {R, S1}, {S1, P}, {P, R}};
        try (Tensor a = base(7, 6); Tensor b = TestTensors.pattern(new long[] {6}, ScalarType.Float, 2, 5, 1); Tensor want = a.add(b)) {
            for (Placement[] pa : layouts) {
                for (Placement[] pb : new Placement[][] {{R, R}, {S0, R}, {R, S0}, {P, P}}) {
                    DTensor x = make(a, grid, pa);
                    x.add_(make(b, grid, pb));
                    assertEquals(List.of(pa), x.placements());
                    assertValue(want, x, List.of(pa) + " += broadcast " + List.of(pb));
                }
            }
        }
    }

    @Test
    void shouldComputeOutOfPlaceAndCopyBackWhereNoShardCanTakeItsPart() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = base(8, 3)) {
            DTensor partial = make(a, line, P);
            dt.aten(AtenCall.of("relu_", "T", (Object) null), partial);
            assertEquals(List.of(P), partial.placements(), "the tensor keeps its placements");
            try (Tensor want = a.relu()) {
                assertValue(want, partial, "relu_ of a partial sum");
            }
            ShardingException strict = Strict.refuses(dt, ShardingException.class,
                () -> dt.aten(AtenCall.of("relu_", "T", (Object) null), make(a, line, P)));
            assertTrue(strict.getMessage().contains("relu_") && strict.getMessage().contains("P(sum)"), strict.getMessage());
            IllegalArgumentException dtype = assertThrows(IllegalArgumentException.class,
                () -> dt.arange(0, 8, 1, ScalarType.Long, line, S0).add_(0.5));
            assertTrue(dtype.getMessage().contains("add_"), dtype.getMessage());
        }
    }

    @Test
    void shouldWriteABoxIntoEveryLayoutAsTorchDoes() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        List<Index[]> boxes = List.of(
            new Index[] {Index.at(2)}, new Index[] {Index.at(-1)}, new Index[] {Index.slice(1L, 6L)},
            new Index[] {Index.slice(null, null, 3)}, new Index[] {Index.all(), Index.at(4)},
            new Index[] {Index.ellipsis(), Index.slice(-3L, null)}, new Index[] {Index.slice(3L, 3L)},
            new Index[] {Index.slice(2L, 7L, 2), Index.slice(1L, 5L)}, new Index[] {Index.none(), Index.at(0), Index.at(5)});
        List<Placement[]> layouts = List.of(new Placement[] {R}, new Placement[] {S0}, new Placement[] {S1}, new Placement[] {P});
        List<Placement[]> gridLayouts = List.of(new Placement[] {S0, S0}, new Placement[] {S1, S0}, new Placement[] {P, S1});
        for (Index[] box : boxes) {
            for (boolean tensorValue : new boolean[] {false, true}) {
                for (Placement[] p : layouts) {
                    checkBox(line, p, box, tensorValue);
                }
                for (Placement[] p : gridLayouts) {
                    checkBox(grid, p, box, tensorValue);
                }
            }
        }
    }

    private static void checkBox(DeviceMesh mesh, Placement[] placements, Index[] box, boolean tensorValue) {
        String what = List.of(placements) + " on " + mesh + ", box " + List.of(box) + (tensorValue ? ", tensor value" : ", number");
        try (Tensor a = base(9, 6); Tensor want = a.clone()) {
            DTensor x = make(a, mesh, placements);
            try (Tensor target = torchView(want, box)) {
                if (tensorValue) {
                    long[] shape = target.sizes().vec().get();
                    try (Tensor v = TestTensors.pattern(shape.length == 0 ? new long[] {1} : shape, ScalarType.Float, 5, 9, 2)) {
                        try (Tensor vv = shape.length == 0 ? v.reshape(shape) : v.clone()) {
                            target.copy_(vv);
                            x.setItem(dt.tensor(vv, mesh, replicated(mesh)), box);
                        }
                    }
                } else {
                    try (Scalar seven = new Scalar(7.0)) {
                        target.fill_(seven);
                    }
                    x.setItem(7.0, box);
                }
            }
            assertEquals(List.of(placements), x.placements(), what);
            assertValue(want, x, what);
        }
    }

    private static Placement[] replicated(DeviceMesh mesh) {
        Placement[] out = new Placement[mesh.ndim()];
        java.util.Arrays.fill(out, R);
        return out;
    }

    /** The torch view of {@code t} a basic index selects, built the way Python's indexing builds it. */
    private static Tensor torchView(Tensor t, Index[] index) {
        List<Index> items = Index.expand((int) t.dim(), index);
        Tensor view = new Tensor(t);
        int d = 0;
        for (Index item : items) {
            Tensor next;
            switch (item) {
                case Index.NewAxis n -> next = view.unsqueeze(d++);
                case Index.At at -> next = view.select(d, at.index() < 0 ? at.index() + view.size(d) : at.index());
                case Index.Slice s -> {
                    long size = view.size(d);
                    long start = s.start() == null ? 0 : Math.max(0, Math.min(s.start() < 0 ? s.start() + size : s.start(), size));
                    long stop = s.stop() == null ? size : Math.max(0, Math.min(s.stop() < 0 ? s.stop() + size : s.stop(), size));
                    next = view.slice(d++, new LongOptional(start), new LongOptional(Math.max(start, stop)), s.step());
                }
                default -> throw new IllegalStateException();
            }
            view.close();
            view = next;
        }
        return view;
    }

    @Test
    void shouldTakeEachDevicesPartOfAShardedValueWhereItLies() {
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor a = base(9, 6); Tensor want = a.clone(); Tensor column = TestTensors.pattern(new long[] {9}, ScalarType.Float, 4, 13, 3);
             Tensor target = want.select(1, 2)) {
            target.copy_(column);
            for (Placement[] own : new Placement[][] {{S0, R}, {R, S0}, {S0, S0}, {P, R}}) {
                DTensor x = make(a, grid, S0, S0);
                DTensor v = make(column, grid, own);
                x.setItem(v, Index.all(), Index.at(2));
                assertEquals(List.of(S0, S0), x.placements());
                assertValue(want, x, "a column of " + List.of(own) + " into [S(0), S(0)]");
            }
        }
    }

    @Test
    void shouldTouchOneRowsBytesWhenWritingOneRowIntoAShardedCache() {
        // The counters are this process's: worker processes keep their own.
        Assumptions.assumeFalse(dt.runtime().options().perDevicePerProcess(), "counts the kernels of this process");
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        long rows = 4096;
        long width = 64;
        for (Placement p : List.of(S0, S1)) {
            DTensor cache = dt.zeros(new long[] {rows, width}, line, p);
            DTensor row = dt.ones(new long[] {1, width}, line, R);
            dt.sync();
            Map<CollectiveKind, Long> before = dt.runtime().groups().collectiveCounter().snapshot();
            long bytesBefore = RegionWriteSpec.bytesWritten();
            cache.setItem(row, Index.at(1234));
            dt.sync();
            assertEquals(width * Float.BYTES, RegionWriteSpec.bytesWritten() - bytesBefore, p + ": one row's bytes, over all devices");
            assertEquals(before, dt.runtime().groups().collectiveCounter().snapshot(), p + ": no collective for a replicated row");
            try (Tensor value = cache.sum(1).toTorch()) {
                assertEquals((double) width, value.get(1234).item_double(), 0.0);
                assertEquals((double) width, value.sum().item_double(), 0.0, "nothing else was written");
            }
        }
    }

    @Test
    void shouldShareMemoryBetweenAViewThatStaysOnItsShardsAndItsBase() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = base(8, 6); Tensor want = a.clone()) {
            DTensor x = dt.tensor(a, line, S0);
            DTensor t = x.transpose(0, 1);
            assertEquals(List.of(S1), t.placements(), "the transpose keeps every shard where it is");
            t.setItem(-3.0, Index.at(2), Index.at(5));
            try (Scalar minusThree = new Scalar(-3.0); Tensor at = want.select(0, 5).select(0, 2)) {
                at.fill_(minusThree);
            }
            assertValue(want, x, "a write into the transpose shows in the base");
            x.add_(1.0);
            try (Scalar one = new Scalar(1.0); Tensor wantT = want.add(one).t()) {
                assertValue(wantT, t, "a write into the base shows in the transpose");
            }
            DTensor columns = x.getItem(Index.all(), Index.slice(1L, 3L));
            assertEquals(List.of(S0), columns.placements());
            columns.zero_();
            try (Scalar one = new Scalar(1.0); Tensor w = want.add(one); Tensor cols = w.narrow(1, 1, 2); Scalar zero = new Scalar(0.0)) {
                cols.fill_(zero);
                assertValue(w, x, "zero_ of a column slice of a row-sharded tensor");
            }
        }
    }

    @Test
    void shouldShareMemoryWithARedistributionThatMovesNothingAsPyTorchDoes() {
        // PyTorch DTensor's redistribute returns the local tensor itself when the placements are equal or differ only
        // on mesh dimensions of one device: writes into either show in the other. Any other move makes new memory.
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DeviceMesh one = dt.mesh(2);
        DeviceMesh twoByOne = dt.initDeviceMesh(new int[] {2, 1});
        try (Tensor a = base(6, 4); Scalar one1 = new Scalar(1.0); Tensor plusOne = a.add(one1);
             Scalar two = new Scalar(2.0); Tensor plusTwo = plusOne.add(two)) {
            record Move(String what, DTensor source, Placement[] target) {
            }

            for (Move m : List.of(
                new Move("S(0) -> S(0) on 4 devices", dt.tensor(a, line, S0), new Placement[] {S0}),
                new Move("S(0) -> R on one device", dt.tensor(a, one, S0), new Placement[] {R}),
                new Move("P -> R on one device", make(a, one, P), new Placement[] {R}),
                new Move("[S(0), S(1)] -> [S(0), R] on 2x1", dt.tensor(a, twoByOne, S0, S1), new Placement[] {S0, R}),
                new Move("[S(0), S(0)] -> [S(0), R] on 2x1", dt.tensor(a, twoByOne, S0, S0), new Placement[] {S0, R}))) {
                DTensor moved = m.source().redistribute(m.target());
                assertEquals(List.of(m.target()), moved.placements(), m.what());
                moved.add_(1.0);
                assertValue(plusOne, m.source(), m.what() + ": a write into the result shows in the source");
                m.source().add_(2.0);
                assertValue(plusTwo, moved, m.what() + ": a write into the source shows in the result");
            }
            DTensor x = dt.tensor(a, line, S0);
            DTensor gathered = x.redistribute(R);
            gathered.add_(1.0);
            assertValue(a, x, "S(0) -> R on 4 devices gathers into new memory");
        }
    }

    @Test
    void shouldWriteBackAViewThatMovedItsBaseAndComputeItAgainWhenTheBaseChanges() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = base(8, 6); Tensor want = a.clone()) {
            DTensor x = dt.tensor(a, line, S0);
            DTensor rows = x.getItem(Index.slice(1L, 4L));
            DTensor again = rows.getItem(Index.at(1));
            again.add_(10.0);
            try (Scalar ten = new Scalar(10.0); Tensor row = want.select(0, 2)) {
                row.add_(ten);
            }
            assertValue(want, x, "a write into a view of a view that moved its base is written back into the base");
            x.setItem(99.0, Index.at(1), Index.at(0));
            try (Scalar v = new Scalar(99.0); Tensor at = want.select(0, 1).select(0, 0)) {
                at.fill_(v);
            }
            try (Tensor w = want.narrow(0, 1, 3)) {
                assertValue(w, rows, "the view is computed again after its base was written");
            }
            DTensor flat = x.reshape(48);
            flat.mul_(2.0);
            try (Scalar two = new Scalar(2.0)) {
                want.mul_(two);
            }
            assertValue(want, x, "a reshape's write");
            DTensor snapshot = x;
            try (Tensor before = snapshot.toTorch()) {
                x.zero_();
                assertNull(OperatorsTest.compare(want, before), "toTorch() is what the tensor held when it was asked");
            }
        }
    }

    @Test
    void shouldCopyTheResultIntoAnOutTensor() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = base(8, 6); Tensor b = TestTensors.pattern(new long[] {8, 6}, ScalarType.Float, 2, 7, 0); Tensor want = a.add(b)) {
            DTensor out = dt.zeros(new long[] {8, 6}, line, S1);
            List<DTensor> got = dt.aten(AtenCall.of("add", "T,T|out=T", null, null, null), dt.tensor(a, line, S0), dt.tensor(b, line, R), out);
            assertSame(out, got.getFirst());
            assertEquals(List.of(S1), out.placements());
            assertValue(want, out, "add(..., out=)");
            IllegalArgumentException shape = assertThrows(IllegalArgumentException.class, () -> dt.aten(AtenCall.of("add", "T,T|out=T", null,
                null, null), dt.tensor(a, line, S0), dt.tensor(b, line, R), dt.zeros(new long[] {3}, line, R)));
            assertTrue(shape.getMessage().contains("not resized"), shape.getMessage());
        }
    }

    @Test
    void shouldRefuseInStrictModeAWriteWhoseValueMustMove() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DTensor x = dt.zeros(new long[] {8, 4}, line, S0);
        DTensor v = dt.ones(new long[] {8, 4}, line, S1);
        ShardingException e = Strict.refuses(dt, ShardingException.class, () -> x.add_(v));
        assertTrue(e.getMessage().contains("add_"), e.getMessage());
        ShardingException box = Strict.refuses(dt, ShardingException.class, () -> x.setItem(dt.ones(new long[] {4}, line, S0), Index.at(3)));
        assertTrue(box.getMessage().contains("setitem"), box.getMessage());
        try (Tensor want = torch.ones(8, 4)) {
            assertValue(want, x.add_(v), "and implicitly moves it otherwise");
        }
    }
}
