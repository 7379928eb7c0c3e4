package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.runtime.process.WireReader;
import org.dtorch.core.runtime.process.WireWriter;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenCall.Constant;
import org.dtorch.ops.aten.AtenCall.Input;
import org.dtorch.ops.aten.AtenCall.InputList;
import org.dtorch.ops.aten.AtenOps;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Tensor lists in the generic operator: {@code Tensor[]} parameters ({@link InputList}) and returns in {@link AtenCall},
 * their encoding ({@link AtenCallCodec}), and the {@link ConcatSplitStrategy} of the operators that join lists or cut
 * tensors into them, against libtorch on whole tensors: every operator of the family on random shapes (uneven shards
 * included) and random placements on 1-, 2-, 4- and 2x2-device meshes, the placements the strategy picks, and
 * operators with lists outside the family on the replicated fallback.
 */
@Timeout(300)
class ConcatSplitOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();
    private static final Placement P = Placement.partial();
    private static final int[][] MESHES = {{1}, {2}, {4}, {2, 2}};
    private static final Random RANDOM = new Random(34);

    /** {@code count} placeholders for a {@code Tensor[]} value of {@link GenericOpsTest#call}. */
    private static List<Object> tensors(int count) {
        return Collections.nCopies(count, null);
    }

    private static Tensor torchCat(List<Tensor> parts, long dim) {
        try (TensorVector v = new TensorVector(parts.toArray(Tensor[]::new)); TensorArrayRef ref = new TensorArrayRef(v)) {
            return torch.cat(ref, dim);
        }
    }

    @Test
    void shouldBindTensorListsAndReturnThemInOrder() {
        AtenCall cat = call("cat", "[T]|dim=i", tensors(3), 1L);
        assertEquals(List.of(new InputList(0, 3), new Constant(1L)), cat.args());
        assertEquals(3, cat.inputCount());
        assertEquals("aten::cat([#0..#2], 1)", cat.toString());
        AtenCall where = call("index_put", "T,[T],T", null, tensors(2), null);
        assertEquals(List.of(new Input(0), new InputList(1, 2), new Input(3)), where.args().subList(0, 3));
        try (Tensor a = torch.rand(2, 3); Tensor b = torch.rand(2, 1); Tensor c = torch.rand(2, 2)) {
            List<Tensor> got = cat.call(List.of(a, b, c));
            try (Tensor want = torchCat(List.of(a, b, c), 1); Tensor one = got.getFirst()) {
                assertTrue(torch.equal(one, want));
            }
            List<Tensor> parts = call("split", "T,i|dim=i", null, 2L, 1L).call(List.of(a));
            assertEquals(List.of(List.of(2L, 2L), List.of(2L, 1L)), parts.stream().map(t -> Arrays.stream(t.sizes().vec().get()).boxed().toList()).toList());
            parts.forEach(Tensor::close);
        }
        assertThrows(IllegalArgumentException.class, () -> new AtenCall(AtenOps.overload("relu", ""), List.of(new InputList(0, 1))),
            "a tensor list where one tensor goes");
        assertThrows(IllegalArgumentException.class, () -> new AtenCall(AtenOps.overload("cat", ""), List.of(new InputList(1, 2), new Constant(0L))),
            "inputs not numbered from 0");
        assertThrows(IllegalArgumentException.class, () -> new AtenCall(AtenOps.overload("cat", ""), List.of(new InputList(0, -1), new Constant(0L))));
    }

    @Test
    void shouldRoundTripTensorListsOnTheWire() {
        List<AtenCall> calls = List.of(call("cat", "[T]|dim=i", tensors(3), -1L), call("stack", "[T]", tensors(0)),
            call("index_put", "T,[T],T", null, tensors(2), null), call("split", "T,[i]|dim=i", null, List.of(1L, 2L), 0L));
        for (AtenCall c : calls) {
            WireWriter out = new WireWriter();
            AtenCallCodec.write(c, out);
            byte[] bytes = out.toByteArray();
            WireReader in = new WireReader(bytes, 0, bytes.length);
            assertEquals(c, AtenCallCodec.read(in), c.toString());
            in.expectEnd("aten call");
        }
    }

    @Test
    void shouldKeepShardsOffTheJoinedOrCutDimensionAndGatherIt() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {4});
        try (Tensor a = torch.rand(9, 6); Tensor b = torch.rand(9, 3);
             DTensor da = dt.tensor(a, mesh, Placement.shard(0)); DTensor db = dt.tensor(b, mesh, Placement.shard(0));
             DTensor rb = dt.tensor(b, mesh, R); DTensor pa = da.redistribute(P); DTensor pb = db.redistribute(P)) {
            assertEquals(List.of(Placement.shard(0)), dt.cat(List.of(da, db), 1).placements(), "sharded alike off the cat dim");
            assertEquals(List.of(Placement.shard(0)), dt.cat(List.of(da, rb), 1).placements(), "the replicated input is sliced");
            assertEquals(List.of(R), dt.cat(List.of(da, da), 0).placements(), "the cat dim is gathered");
            assertEquals(List.of(P), dt.cat(List.of(pa, pb), 1).placements(), "a cat of partial sums is a partial sum");
            assertEquals(List.of(Placement.shard(1)), only(dt.aten(call("stack", "[T]|dim=i", tensors(2), 0L), da, da)).placements(),
                "stack shifts the shard past the new dimension");
            assertEquals(List.of(Placement.shard(0)), only(dt.aten(call("stack", "[T]|dim=i", tensors(2), 2L), da, da)).placements());
            List<DTensor> parts = dt.aten(call("split", "T,i|dim=i", null, 4L, 1L), da);
            assertEquals(2, parts.size());
            parts.forEach(t -> assertEquals(List.of(Placement.shard(0)), t.placements()));
            parts.forEach(DTensor::close);
            dt.aten(call("chunk", "T,i|dim=i", null, 3L, 0L), da).forEach(t -> {
                assertEquals(List.of(R), t.placements(), "the split dim is gathered");
                t.close();
            });
            List<DTensor> rows = dt.aten(call("unbind", "T|dim=i", null, 1L), da);
            assertEquals(6, rows.size());
            rows.forEach(t -> assertEquals(List.of(Placement.shard(0)), t.placements()));
            try (Tensor want = a.select(1, 4); Tensor got = rows.get(4).toTorch()) {
                assertTrue(torch.equal(got, want));
            }
            rows.forEach(DTensor::close);
            dt.aten(call("tensor_split", "T,i|dim=i", null, 2L, 1L), pa).forEach(t -> {
                assertEquals(List.of(P), t.placements(), "a split of a partial sum is a partial sum");
                t.close();
            });
        }
    }

    @Test
    void shouldPickTheShardThatMovesLeastAndRefuseOtherPlacementsByHand() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor a = torch.rand(8, 4, 6); Tensor b = torch.rand(8, 4, 6);
             DTensor da = dt.tensor(a, mesh, Placement.shard(0), Placement.shard(2)); DTensor db = dt.tensor(b, mesh, R, R)) {
            // b is whole everywhere and moves for free (a local slice); gathering a's shards would cost an all-gather.
            DTensor out = dt.cat(List.of(da, db), 1);
            assertEquals(List.of(Placement.shard(0), Placement.shard(2)), out.placements());
            try (Tensor got = out.toTorch(); Tensor want = torchCat(List.of(a, b), 1)) {
                assertTrue(torch.equal(got, want));
            }
            ShardingException e = Strict.refuses(dt, ShardingException.class, () -> dt.apply(new AtenSpec(call("cat", "[T]|dim=i", tensors(2), 0L)), da, db));
            assertTrue(e.getMessage().contains("concat-split") && e.getMessage().contains("other than the one joined or cut"), e.getMessage());
        }
    }

    @Test
    void shouldRunListOperatorsWithoutStrategyOnReplicatedInputs() {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2});
        try (Tensor a = torch.rand(6, 1); Tensor b = torch.rand(5); Tensor rows = torch.randint(0, 6, new long[] {3});
             DTensor da = dt.tensor(a, mesh, Placement.shard(0), R); DTensor db = dt.tensor(b, mesh, R, Placement.shard(0));
             DTensor dr = dt.tensor(rows, mesh, Placement.shard(0), R)) {
            AtenCall broadcast = call("broadcast_tensors", "[T]", tensors(2));
            assertEquals("replicate", StrategyTable.of(broadcast).family());
            List<DTensor> got = dt.aten(broadcast, da, db);
            List<Tensor> want = broadcast.call(List.of(a, b));
            assertEquals(2, got.size());
            for (int i = 0; i < 2; i++) {
                try (DTensor g = got.get(i); Tensor value = g.toTorch(); Tensor w = want.get(i)) {
                    assertEquals(List.of(R, R), g.placements());
                    assertTrue(torch.equal(value, w), "broadcast_tensors output " + i);
                }
            }
            AtenCall index = call("index", "T,[T]", null, tensors(1));
            try (DTensor g = only(dt.aten(index, da, dr)); Tensor value = g.toTorch(); Tensor w = index.call(List.of(a, rows)).getFirst()) {
                assertTrue(torch.equal(value, w), "index with a list of index tensors");
            }
        }
    }

    private static DTensor only(List<DTensor> outputs) {
        assertEquals(1, outputs.size());
        return outputs.getFirst();
    }

    @Test
    void shouldRunEveryOperatorOfTheFamilyLikeTorch() {
        walk(dt, 3);
    }

    /**
     * Every operator of the family against torch on {@code runtime}, {@code rounds} times over every mesh of
     * {@link #MESHES} (new shapes and placements each time).
     */
    static void walk(DTorch runtime, int rounds) {
        int checked = 0;
        for (String name : StrategyTable.concatSplitNames().stream().sorted().toList()) {
            for (int round = 0; round < rounds * MESHES.length; round++) {
                int[] mesh = MESHES[round % MESHES.length];
                ScalarType dtype = RANDOM.nextInt(3) == 0 ? ScalarType.Long : ScalarType.Float;
                int n = name.equals("dsplit") ? 3 : 2 + RANDOM.nextInt(2);
                long[] base = new long[n];
                for (int k = 0; k < n; k++) {
                    base[k] = 3 + RANDOM.nextInt(7);
                }
                int d = RANDOM.nextInt(n);
                long dim = RANDOM.nextBoolean() ? d : d - n;
                List<long[]> shapes = new ArrayList<>();
                AtenCall c = switch (name) {
                    case "cat", "concat", "concatenate" -> {
                        int count = 2 + RANDOM.nextInt(2);
                        for (int i = 0; i < count; i++) {
                            long[] s = base.clone();
                            s[d] = 1 + RANDOM.nextInt(6);
                            shapes.add(s);
                        }
                        yield call(name, "[T]|dim=i", tensors(count), dim);
                    }
                    case "stack" -> {
                        shapes.addAll(List.of(base, base, base));
                        yield call(name, "[T]|dim=i", tensors(3), (long) RANDOM.nextInt(n + 1));
                    }
                    case "hstack", "vstack", "row_stack", "dstack", "column_stack" -> {
                        long[] s = Arrays.copyOf(base, 1 + RANDOM.nextInt(n));
                        shapes.addAll(List.of(s, s));
                        yield call(name, "[T]", tensors(2));
                    }
                    case "split" -> {
                        shapes.add(base);
                        yield RANDOM.nextBoolean() ? call(name, "T,i|dim=i", null, 1L + RANDOM.nextInt(4), dim)
                            : call(name, "T,[i]|dim=i", null, sizes(base[d]), dim);
                    }
                    case "split_with_sizes" -> {
                        shapes.add(base);
                        yield call(name, "T,[i]|dim=i", null, sizes(base[d]), dim);
                    }
                    case "chunk" -> {
                        shapes.add(base);
                        yield call(name, "T,i|dim=i", null, 2L + RANDOM.nextInt(3), dim);
                    }
                    case "unbind" -> {
                        shapes.add(base);
                        yield call(name, "T|dim=i", null, dim);
                    }
                    case "tensor_split" -> {
                        shapes.add(base);
                        yield RANDOM.nextBoolean() ? call(name, "T,i|dim=i", null, 2L + RANDOM.nextInt(3), dim)
                            : call(name, "T,[i]|dim=i", null, List.of(1L, base[d] - 1), dim);
                    }
                    case "hsplit", "vsplit", "dsplit" -> {
                        shapes.add(base);
                        int cut = name.equals("vsplit") ? 0 : name.equals("dsplit") ? 2 : 1;
                        yield call(name, "T,[i]", null, List.of(1L, base[cut] - 1));
                    }
                    default -> throw new AssertionError("no case for " + name);
                };
                assertEquals("concat-split", StrategyTable.of(c).family(), c.toString());
                checkAgainstTorch(runtime, c, shapes, dtype, mesh);
                checked++;
            }
        }
        assertTrue(checked >= rounds * MESHES.length * 17, "walked " + checked);
    }

    /** Random sizes that add up to {@code total}. */
    private static List<Long> sizes(long total) {
        List<Long> out = new ArrayList<>();
        for (long left = total; left > 0; ) {
            long s = 1 + RANDOM.nextInt((int) Math.min(left, 3));
            out.add(s);
            left -= s;
        }
        return out;
    }

    /** {@code c} on random tensors of {@code shapes} with random placements over {@code meshShape}, against torch. */
    private static void checkAgainstTorch(DTorch runtime, AtenCall c, List<long[]> shapes, ScalarType dtype, int[] meshShape) {
        DeviceMesh mesh = runtime.initDeviceMesh(meshShape);
        List<Tensor> locals = new ArrayList<>();
        List<DTensor> inputs = new ArrayList<>();
        List<DTensor> out = List.of();
        List<Tensor> expected = List.of();
        try {
            for (long[] shape : shapes) {
                Tensor t = GenericOpsTest.random(shape, dtype);
                locals.add(t);
                inputs.add(GenericOpsTest.distribute(runtime, t, mesh, dtype == ScalarType.Float));
            }
            out = runtime.aten(c, inputs.toArray(DTensor[]::new));
            expected = c.call(locals);
            String what = c + " on " + inputs.stream().map(DTensor::placements).toList() + " " + shapes.stream().map(Arrays::toString).toList()
                + " over " + Arrays.toString(meshShape);
            assertEquals(expected.size(), out.size(), what);
            for (int r = 0; r < out.size(); r++) {
                try (Tensor got = out.get(r).toTorch()) {
                    Tensor want = expected.get(r);
                    String at = what + " -> output " + r + " " + out.get(r).placements();
                    assertEquals(Arrays.toString(want.sizes().vec().get()), Arrays.toString(got.sizes().vec().get()), at);
                    assertEquals(want.scalar_type().intern(), got.scalar_type().intern(), at);
                    boolean same = dtype == ScalarType.Long ? torch.equal(got, want) : torch.allclose(got, want, 1e-5, 1e-6, true);
                    if (!same) {
                        fail(at + ": values differ\n got  " + got + "\n want " + want);
                    }
                }
            }
        } finally {
            out.forEach(DTensor::close);
            expected.forEach(Tensor::close);
            inputs.forEach(DTensor::close);
            locals.forEach(Tensor::close);
        }
    }
}
