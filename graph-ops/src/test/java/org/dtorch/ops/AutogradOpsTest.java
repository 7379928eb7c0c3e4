package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Function;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.GradTape;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Gradients of distributed tensors against libtorch's autograd on the whole tensors: every operator family the tape has
 * a derivative for, and every kind of redistribution step, on random placements (partial inputs, uneven and empty
 * shards) of a 1-D and a 2-D mesh. Each case's loss is {@code sum(out * w)} for a fixed random {@code w}, so the seed
 * gradient is not uniform; gradients agree to {@code rtol 1e-4, atol 1e-5} and carry their leaf's placements
 * ({@code P} as {@code R}).
 */
@Timeout(300)
class AutogradOpsTest extends FourDeviceRuntime {
    private static final Placement R = Placement.replicate();

    /** One input: its shape, and for an integral input the bound of its values (0: a float input). */
    record In(long[] shape, long high) {
        /** Whether the input requires grad: every float input but {@link #weights}. */
        boolean differentiable() {
            return high <= 0 && high != WEIGHTS;
        }
    }

    private static final long WEIGHTS = -3;

    static In f(long... shape) {
        return new In(shape, 0);
    }

    /** A float input of values in [0.5, 1.5): for operators defined on positive numbers. */
    static In pos(long... shape) {
        return new In(shape, -1);
    }

    /** A float input of values in [0.5, 1.5) that does not require grad: class weights, which torch does not differentiate. */
    static In weights(long... shape) {
        return new In(shape, WEIGHTS);
    }

    /** A float input of the whole numbers 0, 1 and 2: many ties, for the operators that choose among equal values. */
    static In ties(long... shape) {
        return new In(shape, -2);
    }

    static In idx(long high, long... shape) {
        return new In(shape, high);
    }

    /** One case: the distributed program and the same program on torch tensors, each giving its outputs. */
    record Case(String what, Function<List<DTensor>, List<DTensor>> dist, Function<List<Tensor>, List<Tensor>> local, In... inputs) {
    }

    static Case aten(String what, AtenCall c, In... inputs) {
        return new Case(what, xs -> dt.aten(c, xs.toArray(DTensor[]::new)), ts -> c.call(ts), inputs);
    }

    static Case one(String what, Function<List<DTensor>, DTensor> dist, AtenCall c, In... inputs) {
        return new Case(what, xs -> List.of(dist.apply(xs)), ts -> c.call(ts), inputs);
    }

    /** The cases: each operator family with a derivative. */
    static List<Case> cases() {
        List<Case> cs = new ArrayList<>();
        cs.add(one("add broadcast", x -> x.get(0).add(x.get(1)), call("add", "T,T", null, null), f(5, 6), f(6)));
        cs.add(one("sub broadcast", x -> x.get(0).sub(x.get(1)), call("sub", "T,T", null, null), f(5, 1), f(5, 6)));
        cs.add(one("mul broadcast", x -> x.get(0).mul(x.get(1)), call("mul", "T,T", null, null), f(3, 5, 6), f(5, 1)));
        cs.add(one("div", x -> x.get(0).div(x.get(1)), call("div", "T,T", null, null), f(5, 6), f(5, 6)));
        cs.add(one("scalar mul", x -> x.get(0).mul(2.5), call("mul", "T,f", null, 2.5), f(7, 3)));
        cs.add(new Case("scalar rdiv", x -> List.of(x.get(0).rdiv(1.5)), ts -> List.of(torch.reciprocal(ts.get(0)).mul(new Scalar(1.5))),
            f(7, 3)));
        cs.add(new Case("scalar rsub", x -> List.of(x.get(0).rsub(1.5)), ts -> List.of(ts.get(0).neg()), f(7, 3)));
        for (String u : List.of("neg", "relu", "silu", "gelu", "exp", "tanh", "sigmoid")) {
            cs.add(one(u, x -> unary(x.get(0), u), call(u, "T", (Object) null), f(9, 5)));
        }
        cs.add(one("sum dims", x -> x.get(0).sum(new int[] {0, 2}, false), call("sum", "T|dim=[i]", null, List.of(0L, 2L)), f(5, 3, 6)));
        cs.add(one("mean keepdim", x -> x.get(0).mean(new int[] {-1}, true), call("mean", "T|dim=[i]|keepdim=b", null, List.of(-1L), true),
            f(5, 7)));
        cs.add(one("mean all", x -> x.get(0).mean(), call("mean", "T", (Object) null), f(5, 7)));
        cs.add(aten("aten add alpha", call("add", "T,T|alpha=f", null, null, 0.5), f(4, 6), f(4, 6)));
        cs.add(aten("aten mul", call("mul", "T,T", null, null), f(4, 6), f(1, 6)));
        cs.add(aten("pow", call("pow", "T,f", null, 3.0), f(5, 6)));
        cs.add(aten("rsqrt", call("rsqrt", "T", (Object) null), pos(5, 6)));
        cs.add(aten("gelu tanh", call("gelu", "T|approximate=s", null, "tanh"), f(5, 6)));
        cs.add(aten("aten gelu", call("gelu", "T", (Object) null), f(5, 6)));
        cs.add(aten("softmax", call("softmax", "T,i", null, 1L), f(5, 7)));
        cs.add(aten("log_softmax", call("log_softmax", "T,i", null, -1L), f(3, 5, 7)));
        cs.add(aten("mm", call("mm", "T,T", null, null), f(5, 7), f(7, 3)));
        cs.add(aten("bmm", call("bmm", "T,T", null, null), f(3, 5, 7), f(3, 7, 6)));
        cs.add(aten("matmul broadcast", call("matmul", "T,T", null, null), f(2, 5, 7), f(7, 6)));
        cs.add(aten("matmul vector", call("matmul", "T,T", null, null), f(5, 7), f(7)));
        cs.add(aten("linear", call("linear", "T,T,T", null, null, null), f(2, 5, 7), f(6, 7), f(6)));
        cs.add(aten("linear no bias", call("linear", "T,T", null, null), f(9, 7), f(6, 7)));
        cs.add(aten("layer_norm", call("layer_norm", "T,[i],T,T", null, List.of(8L), null, null), f(3, 5, 8), f(8), f(8)));
        cs.add(aten("layer_norm plain", call("layer_norm", "T,[i]", null, List.of(8L)), f(5, 8)));
        cs.add(aten("rms_norm", call("rms_norm", "T,[i],T,f", null, List.of(8L), null, 1e-5), f(3, 5, 8), f(8)));
        cs.add(aten("embedding", call("embedding", "T,T", null, null), f(11, 6), idx(11, 3, 5)));
        cs.add(aten("embedding padding", call("embedding", "T,T,i", null, null, 2L), f(5, 6), idx(5, 4, 3)));
        cs.add(aten("mse_loss sum", call("mse_loss", "T,T,i", null, null, 2L), f(5, 6), f(5, 6)));
        cs.add(aten("mse_loss", call("mse_loss", "T,T", null, null), f(5, 6), f(5, 6)));
        cs.add(aten("cross_entropy", call("cross_entropy_loss", "T,T", null, null), f(6, 9), idx(9, 6)));
        cs.add(aten("cross_entropy (N, C, d1, d2), ignored class, sum", call("cross_entropy_loss", "T,T,n,i,i", null, null, null, 2L, 1L),
            f(3, 5, 2, 4), idx(5, 3, 2, 4)));
        cs.add(aten("cross_entropy (N, C, d) per position, weighted", call("cross_entropy_loss", "T,T,T,i", null, null, null, 0L),
            f(4, 6, 3), idx(6, 4, 3), weights(6)));
        cs.add(aten("cross_entropy label smoothing, weighted, ignored class", call("cross_entropy_loss", "T,T,T,i,i,f", null, null, null,
            1L, 2L, 0.2), f(7, 5), idx(5, 7), weights(5)));
        cs.add(aten("cross_entropy (N, C, d) label smoothing per position", call("cross_entropy_loss", "T,T,n,i,i,f", null, null, null, 0L,
            -100L, 0.1), f(3, 4, 5), idx(4, 3, 5)));
        cs.add(aten("cross_entropy (C) label smoothing", call("cross_entropy_loss", "T,T,n,i,i,f", null, null, null, 1L, -100L, 0.3),
            f(6), idx(6)));
        cs.add(aten("cross_entropy probabilities, label smoothing", call("cross_entropy_loss", "T,T,n,i,i,f", null, null, null, 1L, -100L,
            0.1), f(6, 5), f(6, 5)));
        cs.add(aten("cross_entropy (N, C, d) probabilities per position, weighted", call("cross_entropy_loss", "T,T,T,i", null, null, null,
            0L), f(2, 4, 3), f(2, 4, 3), weights(4)));
        cs.add(aten("nll_loss_nd (N, C, d1, d2)", call("nll_loss_nd", "T,T", null, null), f(3, 4, 2, 5), idx(4, 3, 2, 5)));
        cs.add(aten("sdpa causal", call("scaled_dot_product_attention", "T,T,T|is_causal=b", null, null, null, true),
            f(2, 4, 5, 8), f(2, 4, 5, 8), f(2, 4, 5, 8)));
        cs.add(aten("sdpa gqa", call("scaled_dot_product_attention", "T,T,T|enable_gqa=b", null, null, null, true),
            f(2, 4, 5, 8), f(2, 2, 6, 8), f(2, 2, 6, 8)));
        cs.add(aten("sdpa additive mask, scale", call("scaled_dot_product_attention", "T,T,T,T|scale=f", null, null, null, null, 0.5),
            f(2, 4, 5, 8), f(2, 4, 6, 8), f(2, 4, 6, 3), weights(5, 6)));
        cs.add(aten("constant_pad_nd", call("constant_pad_nd", "T,[i],f", null, List.of(1L, 2L, 0L, 3L), 0.5), f(3, 5, 7)));
        cs.add(aten("transpose", call("transpose", "T,i,i", null, 0L, 2L), f(3, 5, 7)));
        cs.add(aten("permute", call("permute", "T,[i]", null, List.of(2L, 0L, 1L)), f(3, 5, 7)));
        cs.add(aten("reshape", call("reshape", "T,[i]", null, List.of(15L, 7L)), f(3, 5, 7)));
        cs.add(aten("view", call("view", "T,[i]", null, List.of(3L, 35L)), f(3, 5, 7)));
        cs.add(aten("unsqueeze", call("unsqueeze", "T,i", null, 1L), f(5, 7)));
        cs.add(aten("expand", call("expand", "T,[i]", null, List.of(4L, 5L, 7L)), f(5, 1)));
        cs.add(aten("cat", call("cat", "[T],i", List.of("a", "b"), 1L), f(5, 3), f(5, 4)));
        cs.add(aten("split", call("split", "T,i,i", null, 2L, 1L), f(5, 7)));
        cs.add(aten("chunk", call("chunk", "T,i", null, 3L), f(7, 5)));
        cs.add(aten("slice", call("slice", "T,i,i,i,i", null, 1L, 1L, 6L, 2L), f(5, 7)));
        cs.add(aten("slice contiguous", call("slice", "T,i,i,i,i", null, 0L, 1L, 4L, 1L), f(5, 7)));
        cs.add(aten("slice to the end", call("slice", "T,i,i,i,i", null, -1L, 3L, 100L, 1L), f(2, 5, 7)));
        cs.add(aten("select", call("select", "T,i,i", null, 0L, -2L), f(5, 7)));
        cs.add(aten("narrow", call("narrow", "T,i,i,i", null, 1L, 2L, 3L), f(5, 7)));
        return cs;
    }

    // The tests ------------------------------------------------------------------------------------------------------

    @Test
    void shouldDifferentiateEveryFamilyLikeTorchOnALineAndAGrid() {
        Random random = new Random(33);
        List<String> failures = new ArrayList<>();
        for (Case c : cases()) {
            for (int[] mesh : new int[][] {{4}, {2, 2}}) {
                String failure = check(c, dt.initDeviceMesh(mesh), random);
                if (failure != null) {
                    failures.add(failure);
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Tag("slow")
    @Test
    void shouldDifferentiateEveryFamilyLikeTorchOnManyRandomPlacements() {
        Random random = new Random(34);
        List<String> failures = new ArrayList<>();
        for (int round = 0; round < 8; round++) {
            for (Case c : cases()) {
                for (int[] mesh : new int[][] {{4}, {2, 2}, {2}, {3}}) {
                    String failure = check(c, dt.initDeviceMesh(mesh), random);
                    if (failure != null) {
                        failures.add(failure);
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldReverseEveryRedistributionStep() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        DeviceMesh grid = dt.initDeviceMesh(new int[] {2, 2});
        DeviceMesh other = dt.mesh(2, 3);
        Placement s0 = Placement.shard(0);
        Placement s1 = Placement.shard(1);
        Placement p = Placement.partial();
        Placement[][][] steps = {{{s0}, {R}}, {{R}, {s0}}, {{p}, {R}}, {{R}, {p}}, {{s0}, {s1}}, {{p}, {s1}}, {{s1}, {p}}};
        List<String> failures = new ArrayList<>();
        try (Tensor x = torch.randn(7, 5); Tensor w = torch.randn(7, 5)) {
            for (Placement[][] step : steps) {
                String what = Arrays.toString(step[0]) + " -> " + Arrays.toString(step[1]);
                DTensor dx = leaf(x, line, step[0]);
                DTensor moved = dx.redistribute(step[1]);
                failures.add(compareLeafGrad(what, dx, moved, x, w, line));
            }
            DTensor gx = leaf(x, grid, new Placement[] {s0, p});
            failures.add(compareLeafGrad("grid [S(0), P] -> [R, S(1)]", gx, gx.redistribute(R, s1), x, w, grid));
            DTensor cx = leaf(x, line, new Placement[] {s1});
            failures.add(compareLeafGrad("across meshes [S(1)] -> [S(0)] on devices 2, 3", cx, cx.redistribute(other, s0), x, w, other));
        }
        failures.removeIf(f -> f == null);
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldAccumulateClearAndDetach() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor x = torch.randn(6, 3)) {
            DTensor dx = leaf(x, line, new Placement[] {Placement.shard(0)});
            assertTrue(dx.isLeaf());
            DTensor y = dx.mul(dx).sum();
            assertFalse(y.isLeaf());
            assertEquals("sum", y.gradFn());
            y.backward();
            try (Tensor once = dx.grad().toTorch(); Tensor twiceX = x.mul(new Scalar(2.0))) {
                assertTrue(torch.allclose(once, twiceX, 1e-5, 1e-6, false));
            }
            dx.mul(dx).sum().backward();
            try (Tensor twice = dx.grad().toTorch(); Tensor fourX = x.mul(new Scalar(4.0))) {
                assertTrue(torch.allclose(twice, fourX, 1e-5, 1e-6, false), "accumulates");
            }
            assertEquals(List.of(Placement.shard(0)), dx.grad().placements());
            dx.setGrad(null);
            assertNull(dx.grad());
            DTensor d = dx.detach();
            assertFalse(d.requiresGrad());
            assertFalse(dx.mul(2.0).detach().requiresGrad());
            assertThrows(IllegalStateException.class, y::backward, "the graph was freed");
        }
    }

    @Test
    void shouldGiveEveryLeafAGradientOfItsOwn() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        try (Tensor x = torch.randn(4, 3); Tensor seed = torch.randn(4, 3)) {
            DTensor a = leaf(x, line, new Placement[] {Placement.shard(0)});
            DTensor b = leaf(x, line, new Placement[] {Placement.shard(0)});
            DTensor given = dt.tensor(seed, line, Placement.shard(0));
            a.add(b).backward(given);
            assertTrue(a.grad() != b.grad() && a.grad() != given, "add passes one gradient to both inputs; each leaf gets a copy");
            a.grad().zero_();
            try (Tensor gotB = b.grad().toTorch(); Tensor gotSeed = given.toTorch()) {
                assertTrue(torch.equal(gotB, seed), "zeroing a's gradient leaves b's");
                assertTrue(torch.equal(gotSeed, seed), "and the seed");
            }
        }
    }

    @Test
    void shouldNotRecordWithoutGradModeAndRefuseOperatorsWithoutDerivative() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        GradTape tape = dt.autograd();
        try (Tensor x = torch.randn(6, 3)) {
            DTensor dx = leaf(x, line, new Placement[] {R});
            try (GradTape.Scope off = tape.noGrad()) {
                assertFalse(tape.isGradEnabled());
                assertFalse(dx.mul(2.0).requiresGrad());
            }
            assertTrue(tape.isGradEnabled());
            DTensor m = dt.aten(call("cumprod", "T,i", null, 0L), dx).getFirst();
            Map<CollectiveKind, Long> before = dt.runtime().groups().collectiveCounter().snapshot();
            UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class, m::backward);
            assertTrue(e.getMessage().contains("cumprod"), e.getMessage());
            assertEquals(before, dt.runtime().groups().collectiveCounter().snapshot(), "nothing ran before the error");
            assertThrows(UnsupportedOperationException.class, () -> dx.add_(1.0), "an in-place write into a leaf that requires grad");
            List<DTensor> g = tape.grad(List.of(dx.mul(dx).sum()), List.of(dx), List.of(), false, false);
            try (Tensor got = g.getFirst().toTorch(); Tensor want = x.mul(new Scalar(2.0))) {
                assertTrue(torch.allclose(got, want, 1e-5, 1e-6, false));
            }
            assertNull(dx.grad(), "autograd.grad returns gradients rather than accumulating them");
        }
    }

    // Helpers ----------------------------------------------------------------------------------------------------------

    private static DTensor unary(DTensor x, String u) {
        return switch (u) {
            case "neg" -> x.neg();
            case "relu" -> x.relu();
            case "silu" -> x.silu();
            case "gelu" -> x.gelu();
            case "exp" -> x.exp();
            case "tanh" -> x.tanh();
            default -> x.sigmoid();
        };
    }

    private static DTensor leaf(Tensor x, DeviceMesh mesh, Placement[] placements) {
        boolean partial = Arrays.stream(placements).anyMatch(Placement::isPartial);
        if (!partial) {
            return dt.tensor(x, mesh, placements).requiresGrad_(true);
        }
        Placement[] whole = placements.clone();
        for (int i = 0; i < whole.length; i++) {
            whole[i] = whole[i].isPartial() ? R : whole[i];
        }
        return dt.tensor(x, mesh, whole).redistribute(placements).requiresGrad_(true);
    }

    /** The gradient of {@code sum(moved * w)} with respect to {@code dx}, against {@code w} itself (the exact gradient). */
    private static String compareLeafGrad(String what, DTensor dx, DTensor moved, Tensor x, Tensor w, DeviceMesh wMesh) {
        DTensor dw = dt.tensor(w, moved.mesh(), whole(moved.placements()));
        moved.mul(dw).sum().backward();
        try (Tensor got = dx.grad().toTorch()) {
            if (!torch.allclose(got, w, 1e-5, 1e-6, false)) {
                return what + ": gradient differs";
            }
        }
        if (!dx.grad().placements().equals(List.of(whole(dx.placements())))) {
            return what + ": gradient placements " + dx.grad().placements() + " for a leaf of " + dx.placements();
        }
        return null;
    }

    /** Runs {@code c} on random placements over {@code mesh} and on torch; a failure's description, or null. */
    static String check(Case c, DeviceMesh mesh, Random random) {
        List<Tensor> locals = new ArrayList<>();
        List<DTensor> inputs = new ArrayList<>();
        for (In in : c.inputs()) {
            Tensor t = in.high() == 0 ? torch.randn(in.shape())
                : in.high() == -2 ? torch.randint(0, 3, in.shape()).to(torch.ScalarType.Float)
                : in.high() < 0 ? torch.rand(in.shape()).add(new Scalar(0.5)) : torch.randint(0, in.high(), in.shape());
            locals.add(t);
            DTensor d = distribute(t, mesh, random, in.high() <= 0);
            if (in.differentiable()) {
                d.requiresGrad_(true);
            }
            inputs.add(d);
        }
        String where = c.what() + " on " + mesh + " with " + inputs.stream().map(d -> d.placements().toString()).toList();
        try {
            List<DTensor> outs = c.dist().apply(inputs);
            List<Tensor> leaves = new ArrayList<>();
            for (int i = 0; i < locals.size(); i++) {
                Tensor t = c.inputs()[i].differentiable() ? locals.get(i).detach().requires_grad_(true) : locals.get(i);
                leaves.add(t);
            }
            List<Tensor> wantOuts = c.local().apply(leaves);
            DTensor loss = null;
            Tensor wantLoss = null;
            for (int o = 0; o < outs.size(); o++) {
                Tensor w = torch.randn(wantOuts.get(o).sizes().vec().get());
                DTensor dw = dt.tensor(w, outs.get(o).mesh(), whole(outs.get(o).placements()));
                DTensor term = outs.get(o).mul(dw).sum();
                Tensor wantTerm = wantOuts.get(o).mul(w).sum();
                loss = loss == null ? term : loss.add(term);
                wantLoss = wantLoss == null ? wantTerm : wantLoss.add(wantTerm);
            }
            assertNotNull(loss);
            loss.backward();
            try (TensorVector roots = new TensorVector(wantLoss); TensorVector none = new TensorVector(); TensorVector all = new TensorVector();
                 BoolOptional retain = new BoolOptional()) {
                torch.backward(roots, none, retain, false, all);
            }
            for (int i = 0; i < locals.size(); i++) {
                if (!c.inputs()[i].differentiable()) {
                    continue;
                }
                DTensor g = inputs.get(i).grad();
                if (g == null) {
                    return where + ": input " + i + " got no gradient";
                }
                if (!g.placements().equals(List.of(whole(inputs.get(i).placements())))) {
                    return where + ": input " + i + "'s gradient is " + g.placements();
                }
                try (Tensor got = g.toTorch()) {
                    Tensor want = leaves.get(i).grad();
                    if (!torch.allclose(got, want, 1e-4, 1e-5, false)) {
                        return where + ": input " + i + "'s gradient differs: max |diff| "
                            + torch.max(torch.abs(got.sub(want))).item_double();
                    }
                }
            }
            return null;
        } catch (RuntimeException e) {
            return where + ": " + e;
        }
    }

    /** {@code t} on {@code mesh}: per mesh dimension R, S(d) of any size (uneven and empty shards), or for floats P(sum). */
    static DTensor distribute(Tensor t, DeviceMesh mesh, Random random, boolean partialAllowed) {
        long[] shape = t.sizes().vec().get();
        Placement[] ps = new Placement[mesh.ndim()];
        for (int m = 0; m < ps.length; m++) {
            int choice = random.nextInt(partialAllowed ? 4 : 3);
            if (choice == 3) {
                ps[m] = Placement.partial();
            } else if (choice > 0 && shape.length > 0) {
                ps[m] = Placement.shard(random.nextInt(shape.length));
            } else {
                ps[m] = R;
            }
        }
        Placement[] whole = whole(List.of(ps));
        DTensor d = dt.tensor(t, mesh, whole);
        return Arrays.equals(whole, ps) ? d : d.redistribute(ps);
    }

    /** {@code ps} with P as R: where a gradient holds whole values. */
    static Placement[] whole(List<Placement> ps) {
        return ps.stream().map(p -> p.isPartial() ? R : p).toArray(Placement[]::new);
    }
}
