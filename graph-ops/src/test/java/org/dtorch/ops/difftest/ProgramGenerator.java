package org.dtorch.ops.difftest;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.Index;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.difftest.MethodStep.Dims;
import org.dtorch.ops.difftest.MethodStep.Kind;

/**
 * Draws random {@link Program}s from a seed: one to three meshes (1-D and 2-D, over up to {@code devices} devices in any
 * order), inputs of float32, bfloat16, int64 and bool with shapes whose sizes fall below, at and above their splits
 * (uneven and empty shards), placements with shards, replicas and partial sums and maxima, and a chain of operators
 * drawn from every family of the strategy table and the hand-written operators, with redistributions and cross-mesh
 * moves among them. Every step is run in libtorch as it is drawn, to know its outputs' shapes and dtypes; a step
 * libtorch refuses is drawn again, so every program runs on one device. Writes go only into values that neither are
 * views nor have views (torch itself leaves it open whether {@code reshape} copies), and the same seed gives the same
 * program.
 *
 * <p>Two kinds of operator are left out on purpose. Rounding ones that are discontinuous everywhere ({@code floor},
 * {@code round}, {@code sign}, ...) turn the last-bit differences of a sum taken in another order into differences of 1.
 * Division by a tensor: a partial sum divided by a divisor with zeros gives parts of {@code +inf} and {@code -inf}
 * whose sum is NaN where the whole is one infinity, and the NaN then spreads through later operators (a softmax's row);
 * division by a number stays.
 *
 * <p>Discontinuous operators read only exact values. A floating value is <em>rounded</em> when its bits may depend on
 * the device's kernels or on the order of a sum: it comes from an operator that rounds (a sum, a mean, a product of
 * matrices, a normalization, a convolution, a transcendental function such as {@code exp} or {@code gelu}, a division)
 * or from a rounded value. Every other floating value is <em>exact</em>: an input, or what element-wise operations that
 * round once per element and alike everywhere ({@code add}, {@code mul}, {@code neg}, {@code maximum}, ...), selections
 * ({@code amax}, {@code where}, ...), casts and moves of data make of exact values. An operator whose result jumps where
 * a floating input crosses a point (comparisons, casts to an integer or bool, {@code logical_*}, {@code argmax},
 * {@code max(dim)}'s indices, {@code all}, {@code any}, {@code count_nonzero}, {@code remainder}, {@code copysign},
 * {@code atan2}, {@code pow}, {@code sqrt}) is not drawn on a rounded value: there the last bit of a CUDA kernel
 * against a CPU one, or of a sum in another order, decides the result, which is then no finding of the runtime's.
 * A cast of a floating value to {@code int64} is not drawn where the value holds NaN or an infinity: C++ leaves that
 * conversion undefined, and CPU and CUDA give different integers.
 *
 * <p>Not thread-safe: one generator per thread.
 */
public final class ProgramGenerator {
    private static final ScalarType F = ScalarType.Float;
    private static final ScalarType BF = ScalarType.BFloat16;
    private static final ScalarType L = ScalarType.Long;
    private static final ScalarType B = ScalarType.Bool;
    private static final List<String> UNARY = List.of("abs", "neg", "relu", "gelu", "silu", "tanh", "sigmoid", "sin", "cos", "square", "erf",
        "exp", "logical_not", "bitwise_not", "sqrt", "hardswish", "mish", "softplus");
    private static final List<String> BINARY = List.of("add", "sub", "mul", "maximum", "minimum", "atan2", "remainder", "bitwise_and",
        "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor", "copysign", "fmax", "fmin", "hypot", "pow");
    private static final List<String> COMPARISONS = List.of("eq", "ne", "lt", "le", "gt", "ge");
    /**
     * ATen operators whose floating outputs are the same bits on any device and in any order where their floating inputs
     * are: one correctly rounded operation per element, selections and moves of data. Every other operator rounds.
     */
    private static final Set<String> EXACT = Set.of("abs", "neg", "relu", "clamp", "leaky_relu", "logical_not", "bitwise_not",
        "add", "sub", "mul", "maximum", "minimum", "fmax", "fmin", "remainder", "copysign", "bitwise_and", "bitwise_or", "bitwise_xor",
        "logical_and", "logical_or", "logical_xor", "where", "masked_fill", "eq", "ne", "lt", "le", "gt", "ge", "amax", "amin", "max", "min",
        "argmax", "argmin", "all", "any", "count_nonzero", "permute", "unsqueeze", "squeeze", "flatten", "select", "slice", "expand", "flip",
        "roll", "index_select", "repeat", "cat", "stack", "split", "chunk", "unbind", "max_pool1d", "max_pool2d");
    /** ATen operators whose result jumps where a floating input crosses a point (zero, another input, an integer). */
    private static final Set<String> DISCONTINUOUS = Set.of("eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
        "logical_xor", "argmax", "argmin", "all", "any", "count_nonzero", "remainder", "copysign", "atan2", "pow", "sqrt");

    private final int devices;
    private final int maxSteps;

    /** A generator for runtimes of {@code devices} devices and programs of up to {@code maxSteps} operators. */
    public ProgramGenerator(int devices, int maxSteps) {
        if (devices < 1 || maxSteps < 1) {
            throw new IllegalArgumentException("devices and maxSteps must be positive, got " + devices + " and " + maxSteps);
        }
        this.devices = devices;
        this.maxSteps = maxSteps;
    }

    /** What the generator knows of a value: its shape, dtype and mesh, and whether it is a view or has one. */
    private static final class Val {
        final long[] shape;
        final ScalarType dtype;
        final int mesh;
        boolean view;
        boolean viewed;
        /** A floating value whose bits may depend on the device or on the order of a sum (see the class comment). */
        boolean rounded;

        Val(long[] shape, ScalarType dtype, int mesh) {
            this.shape = shape;
            this.dtype = dtype;
            this.mesh = mesh;
        }

        int ndim() {
            return shape.length;
        }

        boolean floating() {
            return dtype == F || dtype == BF || dtype == ScalarType.Double || dtype == ScalarType.Half;
        }

        long numel() {
            return Arrays.stream(shape).reduce(1, (a, b) -> a * b);
        }
    }

    /** The program being drawn, with libtorch's value of each of its values. */
    private final class Draw {
        final Random rnd;
        final long seed;
        final List<Program.MeshSpec> meshes = new ArrayList<>();
        final List<Step> steps = new ArrayList<>();
        final List<Val> vals = new ArrayList<>();
        final List<Tensor> refs = new ArrayList<>();
        /** Steps of the batch being drawn: fresh inputs, then the operator. */
        final List<Step> batch = new ArrayList<>();

        Draw(long seed) {
            this.seed = seed;
            this.rnd = new Random(seed);
        }

        int pending() {
            return vals.size() + batch.stream().mapToInt(s -> s instanceof Source ? 1 : 0).sum();
        }

        /** A fresh input of {@code shape} and {@code dtype} on {@code mesh}, in random placements; its value's number. */
        int fresh(long[] shape, ScalarType dtype, int mesh) {
            return fresh(shape, dtype, mesh, 0);
        }

        int fresh(long[] shape, ScalarType dtype, int mesh, long bound) {
            batch.add(new Source(shape, dtype, mesh, placements(shape, dtype, mesh), rnd.nextLong(), bound));
            return pending() - 1;
        }

        List<Placement> placements(long[] shape, ScalarType dtype, int mesh) {
            int dims = meshes.get(mesh).shape().length;
            List<Placement> out = new ArrayList<>();
            for (int m = 0; m < dims; m++) {
                double r = rnd.nextDouble();
                if (r < 0.3 || (r < 0.75 && shape.length == 0)) {
                    out.add(Placement.replicate());
                } else if (r < 0.75) {
                    out.add(Placement.shard(rnd.nextInt(shape.length)));
                } else if (dtype == B) {
                    out.add(Placement.replicate());
                } else if (r < 0.93) {
                    out.add(Placement.partial());
                } else {
                    out.add(Placement.partial(rnd.nextBoolean() ? ReduceOpType.MAX : ReduceOpType.MIN));
                }
            }
            return out;
        }

        /**
         * Runs the batch's steps in libtorch and keeps them; on a refusal drops the batch and returns false. A step of
         * unknown output count (an ATen step drawn with -1) takes libtorch's.
         */
        boolean commit() {
            int stepsBefore = steps.size();
            int valsBefore = vals.size();
            try {
                for (Step s : batch) {
                    List<Tensor> in = Arrays.stream(s.reads()).mapToObj(refs::get).toList();
                    if (!admissible(s, in)) {
                        throw new Inadmissible();
                    }
                    boolean rounded = rounds(s) || Arrays.stream(s.reads()).anyMatch(r -> vals.get(r).rounded);
                    List<Tensor> out = s.reference(in);
                    Step kept = s instanceof AtenStep a && a.outputs() < 0
                        ? new AtenStep(a.name(), a.key(), a.values(), a.reads(), out.size(), a.aliases()) : s;
                    int mesh = s instanceof Move m ? m.mesh() : s instanceof Source src ? src.mesh() : vals.get(s.reads()[0]).mesh;
                    for (Tensor t : out) {
                        refs.add(t);
                        Val v = new Val(TorchTensors.shape(t), TorchTensors.dtype(t), mesh);
                        v.view = s.aliases();
                        v.rounded = rounded && v.floating();
                        vals.add(v);
                    }
                    if (s.aliases()) {
                        vals.get(s.reads()[0]).viewed = true;
                    }
                    if (s.writes() && vals.get(s.reads()[0]).floating()) {
                        vals.get(s.reads()[0]).rounded |= rounded;
                    }
                    steps.add(kept);
                }
                return true;
            } catch (RuntimeException refused) {
                while (steps.size() > stepsBefore) {
                    steps.removeLast();
                }
                while (vals.size() > valsBefore) {
                    vals.removeLast();
                    refs.removeLast().close();
                }
                return false;
            } finally {
                batch.clear();
            }
        }

        /**
         * False where {@code s} is not drawn: a discontinuous step on a rounded value, or a cast to {@code int64} of a
         * value that holds NaN or an infinity ({@code in} are libtorch's values of its reads).
         */
        boolean admissible(Step s, List<Tensor> in) {
            int[] reads = s.reads();
            if (discontinuous(s) && Arrays.stream(reads).anyMatch(r -> vals.get(r).rounded)) {
                return false;
            }
            Tensor cast = castToInteger(s, in);
            if (cast == null) {
                return true;
            }
            try (Tensor finite = torch.isfinite(cast); Tensor all = finite.all()) {
                return all.item_bool();
            }
        }

        /** True where {@code s}'s result jumps where a floating input crosses a point. */
        boolean discontinuous(Step s) {
            return switch (s) {
                case AtenStep a -> DISCONTINUOUS.contains(a.name()) || ((a.name().equals("max") || a.name().equals("min")) && !a.key().equals("T"));
                case MethodStep m -> switch (m.kind()) {
                    case GT, LT, EQ, NE, GT_S -> true;
                    case TO -> m.arg() == L || m.arg() == B;
                    default -> false;
                };
                case Write w -> w.kind() == Write.Kind.COPY_ && !vals.get(w.reads()[0]).floating();
                default -> false;
            };
        }

        /** The floating value {@code s} casts to {@code int64} ({@code to} or {@code copy_} into an int64 target), or null. */
        Tensor castToInteger(Step s, List<Tensor> in) {
            boolean toLong = s instanceof MethodStep m && m.kind() == Kind.TO && m.arg() == L
                || s instanceof Write w && w.kind() == Write.Kind.COPY_ && vals.get(w.reads()[0]).dtype == L;
            Tensor from = toLong ? in.getLast() : null;
            return from != null && torch.isFloatingType(TorchTensors.dtype(from)) ? from : null;
        }

        // ---- drawing helpers ---------------------------------------------------------------------------

        long[] shape() {
            int[] ndims = {0, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4};
            return shape(ndims[rnd.nextInt(ndims.length)]);
        }

        long[] shape(int ndim) {
            long[] s = new long[ndim];
            for (int d = 0; d < ndim; d++) {
                s[d] = size();
            }
            return s;
        }

        long size() {
            double r = rnd.nextDouble();
            return r < 0.02 ? 0 : r < 0.12 ? 1 : 2 + rnd.nextInt(8);
        }

        ScalarType dtype() {
            double r = rnd.nextDouble();
            return r < 0.5 ? F : r < 0.7 ? BF : r < 0.9 ? L : B;
        }

        ScalarType floatType() {
            return rnd.nextDouble() < 0.75 ? F : BF;
        }

        int pickValue() {
            return rnd.nextBoolean() ? vals.size() - 1 : rnd.nextInt(vals.size());
        }

        /** A value of {@code x}'s mesh whose shape is {@code shape}, or -1. */
        int existing(Val x, long[] shape) {
            List<Integer> fits = new ArrayList<>();
            for (int i = 0; i < vals.size(); i++) {
                if (vals.get(i).mesh == x.mesh && Arrays.equals(vals.get(i).shape, shape)) {
                    fits.add(i);
                }
            }
            return fits.isEmpty() ? -1 : fits.get(rnd.nextInt(fits.size()));
        }

        /** {@code shape} or a shape that broadcasts to it (leading dimensions dropped, some sizes 1). */
        long[] broadcastable(long[] shape) {
            if (rnd.nextInt(3) == 0) {
                return shape.clone();
            }
            long[] s = Arrays.copyOfRange(shape, rnd.nextInt(shape.length + 1), shape.length);
            for (int d = 0; d < s.length; d++) {
                if (rnd.nextInt(3) == 0) {
                    s[d] = 1;
                }
            }
            return s;
        }

        /** An operand for {@code x}: an existing value of its shape or a fresh one that broadcasts, of {@code dtype}. */
        int operand(Val x, ScalarType dtype) {
            if (rnd.nextBoolean()) {
                int e = existing(x, x.shape);
                if (e >= 0 && vals.get(e).dtype == dtype) {
                    return e;
                }
            }
            return fresh(broadcastable(x.shape), dtype, x.mesh);
        }

        int dim(Val x) {
            return rnd.nextInt(x.ndim());
        }

        /** A dimension of {@code x}, sometimes counted from the end. */
        long anyDim(Val x) {
            int d = dim(x);
            return rnd.nextInt(4) == 0 ? d - x.ndim() : d;
        }

        double quarter() {
            return (rnd.nextInt(17) - 8) / 4.0;
        }

        Number scalar(Val x) {
            return x.floating() ? (Number) quarter() : (Number) (long) (rnd.nextInt(9) - 4);
        }

        List<Long> dimsSubset(Val x) {
            List<Long> ds = new ArrayList<>();
            for (int d = 0; d < x.ndim(); d++) {
                if (rnd.nextInt(2) == 0) {
                    ds.add((long) d);
                }
            }
            if (ds.isEmpty()) {
                ds.add((long) dim(x));
            }
            return ds;
        }

        /** A value of a floating dtype on {@code x}'s mesh: {@code x} itself where it is one, else a fresh one of its shape. */
        int floating(int xi) {
            Val x = vals.get(xi);
            return x.floating() ? xi : fresh(x.shape, floatType(), x.mesh);
        }

        ScalarType dtypeOf(int i) {
            return i < vals.size() ? vals.get(i).dtype : ((Source) batch.get(i - vals.size())).dtype();
        }

        long[] shapeOf(int i) {
            return i < vals.size() ? vals.get(i).shape : ((Source) batch.get(i - vals.size())).shape();
        }

        void aten(String name, String key, List<Object> values, boolean aliases, int... reads) {
            batch.add(new AtenStep(name, key, values, reads, -1, aliases));
        }
    }

    /** A step the generator does not draw (see {@link Draw#admissible}): its batch is dropped as a refused one is. */
    private static final class Inadmissible extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Inadmissible() {
            super("not drawn", null, false, false);
        }
    }

    /** True where {@code s}'s floating outputs may differ in their last bits between devices or orders of a sum. */
    private static boolean rounds(Step s) {
        return switch (s) {
            case AtenStep a -> !EXACT.contains(a.name());
            case MethodStep m -> switch (m.kind()) {
                case MATMUL, DIV_S, SILU, GELU, EXP, TANH, SIGMOID, SUM, MEAN, SOFTMAX -> true;
                default -> false;
            };
            case Write w -> w.kind() == Write.Kind.DIV_S_;
            default -> false;
        };
    }

    /** The program of {@code seed}. */
    public Program generate(long seed) {
        Draw g = new Draw(seed);
        try {
            drawMeshes(g);
            int inputs = 1 + g.rnd.nextInt(2);
            for (int i = 0; i < inputs; i++) {
                do {
                    g.fresh(g.shape(), g.dtype(), g.rnd.nextInt(g.meshes.size()));
                } while (!g.commit());
            }
            int ops = 1 + g.rnd.nextInt(maxSteps);
            int drawn = 0;
            for (int attempt = 0; drawn < ops && attempt < ops * 20; attempt++) {
                int x = g.pickValue();
                drawStep(g, x);
                if (!g.batch.isEmpty() && g.commit()) {
                    drawn++;
                }
                g.batch.clear();
            }
            return new Program(seed, g.meshes, g.steps);
        } finally {
            g.refs.forEach(Tensor::close);
        }
    }

    private void drawMeshes(Draw g) {
        int count = 1 + g.rnd.nextInt(devices > 1 ? 3 : 1);
        for (int i = 0; i < count; i++) {
            List<Long> ids = new ArrayList<>();
            for (long d = 0; d < devices; d++) {
                ids.add(d);
            }
            Collections.shuffle(ids, g.rnd);
            int[] shape;
            if (devices >= 4 && g.rnd.nextInt(3) == 0) {
                shape = new int[] {2, 2};
            } else if (devices >= 2 && g.rnd.nextInt(8) == 0) {
                shape = g.rnd.nextBoolean() ? new int[] {1, 2} : new int[] {2, 1};
            } else {
                shape = new int[] {1 + g.rnd.nextInt(devices)};
            }
            int n = Arrays.stream(shape).reduce(1, (a, b) -> a * b);
            g.meshes.add(new Program.MeshSpec(shape, ids.subList(0, n).stream().mapToLong(Long::longValue).toArray()));
        }
    }

    private void drawStep(Draw g, int xi) {
        Val x = g.vals.get(xi);
        int family = g.rnd.nextInt(100);
        if (family < 12) {
            unary(g, xi, x);
        } else if (family < 26) {
            binary(g, xi, x);
        } else if (family < 32) {
            comparison(g, xi, x);
        } else if (family < 42) {
            reduction(g, xi, x);
        } else if (family < 50) {
            product(g, xi, x);
        } else if (family < 56) {
            normalization(g, xi, x);
        } else if (family < 66) {
            view(g, xi, x);
        } else if (family < 72) {
            concatSplit(g, xi, x);
        } else if (family < 82) {
            write(g, xi, x);
        } else if (family < 85) {
            convolution(g, xi, x);
        } else if (family < 87) {
            attention(g, xi, x);
        } else if (family < 93) {
            g.batch.add(new Move(new int[] {xi}, x.mesh, g.placements(x.shape, x.dtype, x.mesh)));
        } else if (family < 97) {
            int m = g.rnd.nextInt(g.meshes.size());
            g.batch.add(new Move(new int[] {xi}, m, g.placements(x.shape, x.dtype, m)));
        } else {
            ScalarType[] to = {F, BF, L, B, ScalarType.Double};
            g.batch.add(new MethodStep(Kind.TO, new int[] {xi}, to[g.rnd.nextInt(to.length)]));
        }
    }

    private void unary(Draw g, int xi, Val x) {
        int r = g.rnd.nextInt(10);
        if (r < 3) {
            Kind[] kinds = {Kind.NEG, Kind.RELU, Kind.SILU, Kind.GELU, Kind.EXP, Kind.TANH, Kind.SIGMOID};
            g.batch.add(new MethodStep(kinds[g.rnd.nextInt(kinds.length)], new int[] {xi}, null));
        } else if (r < 4) {
            Kind[] kinds = {Kind.ADD_S, Kind.SUB_S, Kind.MUL_S, Kind.DIV_S, Kind.RSUB_S};
            Kind k = kinds[g.rnd.nextInt(kinds.length)];
            g.batch.add(new MethodStep(k, new int[] {xi}, k == Kind.DIV_S ? (Number) ((g.rnd.nextInt(4) + 1) / 2.0) : g.scalar(x)));
        } else if (r < 5) {
            g.aten("clamp", "T,f,f", Arrays.asList(null, -0.5, 1.25), false, xi);
        } else if (r < 6) {
            g.aten("leaky_relu", "T,f", Arrays.asList(null, 0.25), false, xi);
        } else {
            g.aten(UNARY.get(g.rnd.nextInt(UNARY.size())), "T", Collections.singletonList(null), false, xi);
        }
    }

    private void binary(Draw g, int xi, Val x) {
        int r = g.rnd.nextInt(10);
        if (r < 3) {
            ScalarType t = g.rnd.nextInt(4) == 0 ? g.dtype() : x.dtype;
            int y = g.operand(x, t);
            Kind[] kinds = {Kind.ADD, Kind.SUB, Kind.MUL};
            Kind k = kinds[g.rnd.nextInt(kinds.length)];
            g.batch.add(new MethodStep(k, g.rnd.nextBoolean() ? new int[] {xi, y} : new int[] {y, xi}, null));
        } else if (r < 4) {
            int c = g.operand(x, B);
            int y = g.operand(x, g.rnd.nextBoolean() ? x.dtype : g.dtype());
            g.aten("where", "T,T,T", Arrays.asList(null, null, null), false, c, xi, y);
        } else if (r < 5) {
            int m = g.operand(x, B);
            g.aten("masked_fill", "T,T,f", Arrays.asList(null, null, g.quarter()), false, xi, m);
        } else if (r < 6 && x.floating()) {
            int y = g.operand(x, x.dtype);
            int z = g.operand(x, x.dtype);
            g.aten(g.rnd.nextBoolean() ? "addcmul" : "lerp", g.rnd.nextBoolean() ? "T,T,T" : "T,T,f",
                Arrays.asList(null, null, null), false, xi, y, z);
            if (((AtenStep) g.batch.getLast()).key().equals("T,T,f")) {
                g.batch.removeLast();
                g.aten("lerp", "T,T,f", Arrays.asList(null, null, 0.25), false, xi, y);
            }
        } else {
            ScalarType t = g.rnd.nextInt(3) == 0 ? g.dtype() : x.dtype;
            int y = g.operand(x, t);
            String name = BINARY.get(g.rnd.nextInt(BINARY.size()));
            g.aten(name, "T,T", Arrays.asList(null, null), false, g.rnd.nextBoolean() ? new int[] {xi, y} : new int[] {y, xi});
        }
    }

    private void comparison(Draw g, int xi, Val x) {
        int r = g.rnd.nextInt(4);
        if (r == 0) {
            Kind[] kinds = {Kind.GT, Kind.LT, Kind.EQ, Kind.NE};
            int y = g.operand(x, g.rnd.nextBoolean() ? x.dtype : g.dtype());
            g.batch.add(new MethodStep(kinds[g.rnd.nextInt(kinds.length)], new int[] {xi, y}, null));
        } else if (r == 1) {
            g.batch.add(new MethodStep(Kind.GT_S, new int[] {xi}, g.scalar(x)));
        } else {
            String name = COMPARISONS.get(g.rnd.nextInt(COMPARISONS.size()));
            if (g.rnd.nextBoolean()) {
                g.aten(name, "T,f", Arrays.asList(null, g.quarter()), false, xi);
            } else {
                int y = g.operand(x, g.rnd.nextBoolean() ? x.dtype : g.dtype());
                g.aten(name, "T,T", Arrays.asList(null, null), false, xi, y);
            }
        }
    }

    private void reduction(Draw g, int xi, Val x) {
        boolean keep = g.rnd.nextBoolean();
        int r = g.rnd.nextInt(12);
        if (x.ndim() == 0 || r < 3) {
            Kind k = new Kind[] {Kind.SUM, Kind.MEAN, Kind.MAX_ALL}[g.rnd.nextInt(3)];
            int[] dims = x.ndim() == 0 || g.rnd.nextInt(3) == 0 ? new int[0] : g.dimsSubset(x).stream().mapToInt(Long::intValue).toArray();
            g.batch.add(new MethodStep(k, new int[] {xi}, k == Kind.MAX_ALL ? null : new Dims(dims, dims.length > 0 && keep)));
            return;
        }
        long d = g.anyDim(x);
        switch (r) {
            case 3, 4 -> {
                String[] names = {"sum", "mean", "amax", "amin", "nansum", "logsumexp", "var", "std"};
                g.aten(names[g.rnd.nextInt(names.length)], "T|dim=[i]|keepdim=b", Arrays.asList(null, g.dimsSubset(x), keep), false, xi);
            }
            case 5 -> g.aten(g.rnd.nextBoolean() ? "argmax" : "argmin", "T|dim=i|keepdim=b", Arrays.asList(null, d, keep), false, xi);
            case 6 -> g.aten(g.rnd.nextBoolean() ? "max" : "min", "T,i|keepdim=b", Arrays.asList(null, d, keep), false, xi);
            case 7 -> g.aten(g.rnd.nextBoolean() ? "all" : "any", g.rnd.nextBoolean() ? "T" : "T,i|keepdim=b",
                Arrays.asList(null, d, keep), false, xi);
            case 8 -> g.aten("prod", "T,i|keepdim=b", Arrays.asList(null, d, keep), false, xi);
            case 9 -> g.aten("count_nonzero", "T,[i]", Arrays.asList(null, g.dimsSubset(x)), false, xi);
            case 10 -> g.aten("norm", "T,f,[i]|keepdim=b", Arrays.asList(null, 2.0, g.dimsSubset(x), keep), false, xi);
            default -> g.aten(g.rnd.nextBoolean() ? "sum" : "amax", "T", Collections.singletonList(null), false, xi);
        }
        AtenStep s = (AtenStep) g.batch.getLast();
        if (s.key().equals("T") && s.values().size() > 1) {
            g.batch.set(g.batch.size() - 1, new AtenStep(s.name(), "T", Collections.singletonList(null), s.reads(), -1, false));
        }
    }

    private void product(Draw g, int xi, Val x) {
        int a = g.floating(xi);
        ScalarType t = g.dtypeOf(a);
        long[] s = g.shapeOf(a);
        int r = g.rnd.nextInt(8);
        long n = g.size();
        if (s.length == 0) {
            return;
        }
        long k = s[s.length - 1];
        switch (r) {
            case 0, 1 -> {
                long[] ws = s.length == 1 || g.rnd.nextInt(3) == 0 ? new long[] {k, n} : new long[] {k};
                int w = g.fresh(g.rnd.nextBoolean() ? ws : batchOf(s, k, n), t, x.mesh);
                g.batch.add(new MethodStep(Kind.MATMUL, new int[] {a, w}, null));
            }
            case 2 -> {
                int w = g.fresh(new long[] {k, n}, t, x.mesh);
                g.aten("matmul", "T,T", Arrays.asList(null, null), false, a, w);
            }
            case 3 -> {
                int w = g.fresh(new long[] {k, n}, t, x.mesh);
                g.aten("mm", "T,T", Arrays.asList(null, null), false, a, w);
            }
            case 4 -> {
                int w = g.fresh(batchOf(s, k, n), t, x.mesh);
                g.aten("bmm", "T,T", Arrays.asList(null, null), false, a, w);
            }
            case 5, 6 -> {
                int w = g.fresh(new long[] {n, k}, t, x.mesh);
                if (g.rnd.nextBoolean()) {
                    int b = g.fresh(new long[] {n}, t, x.mesh);
                    g.aten("linear", "T,T,T", Arrays.asList(null, null, null), false, a, w, b);
                } else {
                    g.aten("linear", "T,T", Arrays.asList(null, null), false, a, w);
                }
            }
            default -> {
                int bias = g.fresh(new long[] {n}, t, x.mesh);
                int w = g.fresh(new long[] {k, n}, t, x.mesh);
                g.aten("addmm", "T,T,T", Arrays.asList(null, null, null), false, bias, a, w);
            }
        }
    }

    /** {@code s} with its last two sizes {@code k, n} (a batched right factor for {@code s}). */
    private static long[] batchOf(long[] s, long k, long n) {
        if (s.length < 2) {
            return new long[] {k, n};
        }
        long[] out = s.clone();
        out[s.length - 2] = k;
        out[s.length - 1] = n;
        return out;
    }

    private void normalization(Draw g, int xi, Val x) {
        if (x.ndim() == 0) {
            return;
        }
        int a = g.floating(xi);
        ScalarType t = g.dtypeOf(a);
        long[] s = g.shapeOf(a);
        int r = g.rnd.nextInt(7);
        long d = g.anyDim(x);
        switch (r) {
            case 0 -> g.batch.add(new MethodStep(Kind.SOFTMAX, new int[] {a}, new long[] {d}));
            case 1, 2 -> g.aten(r == 1 ? "softmax" : "log_softmax", "T,i", Arrays.asList(null, d), false, a);
            case 3, 4 -> {
                int k = s.length >= 2 && g.rnd.nextBoolean() ? 2 : 1;
                List<Long> normalized = Arrays.stream(Arrays.copyOfRange(s, s.length - k, s.length)).boxed().toList();
                if (g.rnd.nextBoolean()) {
                    long[] ns = Arrays.copyOfRange(s, s.length - k, s.length);
                    int w = g.fresh(ns, t, x.mesh);
                    int b = g.fresh(ns, t, x.mesh);
                    g.aten("layer_norm", "T,[i],T,T", Arrays.asList(null, normalized, null, null), false, a, w, b);
                } else {
                    g.aten(r == 3 ? "layer_norm" : "rms_norm", "T,[i]", Arrays.asList(null, normalized), false, a);
                }
            }
            case 5 -> {
                if (s.length >= 2 && s[1] > 0) {
                    long groups = s[1] % 2 == 0 && g.rnd.nextBoolean() ? 2 : 1;
                    g.aten("group_norm", "T,i", Arrays.asList(null, groups), false, a);
                }
            }
            default -> {
                if (s.length >= 2) {
                    long[] c = {s[1]};
                    int w = g.fresh(c, t, x.mesh);
                    int b = g.fresh(c, t, x.mesh);
                    int mean = g.fresh(c, t, x.mesh);
                    int var = g.fresh(c, t, x.mesh);
                    g.aten("batch_norm", "T,T,T,T,T,b,f,f,b", Arrays.asList(null, null, null, null, null, false, 0.1, 4.0, false), false,
                        a, w, b, mean, var);
                }
            }
        }
    }

    private void view(Draw g, int xi, Val x) {
        int r = g.rnd.nextInt(16);
        int n = x.ndim();
        if (n == 0) {
            g.batch.add(new MethodStep(Kind.RESHAPE, new int[] {xi}, new long[] {1}));
            return;
        }
        switch (r) {
            case 0 -> g.batch.add(new MethodStep(Kind.TRANSPOSE, new int[] {xi}, new long[] {g.anyDim(x), g.anyDim(x)}));
            case 1 -> {
                List<Long> perm = new ArrayList<>();
                for (long d = 0; d < n; d++) {
                    perm.add(d);
                }
                Collections.shuffle(perm, g.rnd);
                long[] p = perm.stream().mapToLong(Long::longValue).toArray();
                if (g.rnd.nextBoolean()) {
                    g.batch.add(new MethodStep(Kind.PERMUTE, new int[] {xi}, p));
                } else {
                    g.aten("permute", "T,[i]", Arrays.asList(null, perm), true, xi);
                }
            }
            case 2, 3 -> g.batch.add(new MethodStep(g.rnd.nextBoolean() ? Kind.RESHAPE : Kind.VIEW, new int[] {xi}, factor(g, x)));
            case 4 -> {
                int d = g.dim(x);
                long start = x.shape[d] == 0 ? 0 : g.rnd.nextInt((int) x.shape[d]);
                long len = g.rnd.nextInt((int) (x.shape[d] - start) + 1);
                g.batch.add(new MethodStep(Kind.NARROW, new int[] {xi}, new long[] {d, start, len}));
            }
            case 5 -> g.batch.add(new MethodStep(Kind.GET_ITEM, new int[] {xi}, index(g, x)));
            case 6 -> g.aten("unsqueeze", "T,i", Arrays.asList(null, (long) g.rnd.nextInt(n + 1)), true, xi);
            case 7 -> g.aten("squeeze", "T,i", Arrays.asList(null, g.anyDim(x)), true, xi);
            case 8 -> g.aten("flatten", "T,i,i", Arrays.asList(null, 0L, (long) g.dim(x)), true, xi);
            case 9 -> g.aten("select", "T,i,i", Arrays.asList(null, g.anyDim(x), (long) (g.rnd.nextInt(3) - 1)), true, xi);
            case 10 -> g.aten("slice", "T,i,i,i,i", Arrays.asList(null, g.anyDim(x), (long) g.rnd.nextInt(3), (long) (2 + g.rnd.nextInt(8)),
                (long) (1 + g.rnd.nextInt(3))), true, xi);
            case 11 -> {
                List<Long> to = new ArrayList<>();
                if (g.rnd.nextBoolean()) {
                    to.add((long) (1 + g.rnd.nextInt(3)));
                }
                for (long s : x.shape) {
                    to.add(s == 1 ? (long) (1 + g.rnd.nextInt(4)) : s);
                }
                g.aten("expand", "T,[i]", Arrays.asList(null, to), true, xi);
            }
            case 12 -> g.aten("flip", "T,[i]", Arrays.asList(null, g.dimsSubset(x)), false, xi);
            case 13 -> g.aten("roll", "T,[i],[i]", Arrays.asList(null, List.of((long) (g.rnd.nextInt(7) - 3)), List.of(g.anyDim(x))), false, xi);
            case 14 -> {
                int d = g.dim(x);
                if (x.shape[d] > 0) {
                    int idx = g.fresh(new long[] {g.size()}, L, x.mesh, x.shape[d]);
                    g.aten("index_select", "T,i,T", Arrays.asList(null, (long) d, null), false, xi, idx);
                }
            }
            default -> {
                List<Long> reps = new ArrayList<>();
                for (int d = 0; d < n; d++) {
                    reps.add((long) (1 + g.rnd.nextInt(2)));
                }
                g.aten("repeat", "T,[i]", Arrays.asList(null, reps), false, xi);
            }
        }
    }

    /** A shape of {@code x}'s number of elements: its sizes regrouped, sometimes with a -1. */
    private static long[] factor(Draw g, Val x) {
        List<Long> sizes = new ArrayList<>();
        for (long s : x.shape) {
            sizes.add(s);
        }
        List<Long> out = new ArrayList<>();
        int i = 0;
        while (i < sizes.size()) {
            int take = 1 + g.rnd.nextInt(Math.min(2, sizes.size() - i));
            long p = 1;
            for (int k = 0; k < take; k++) {
                p *= sizes.get(i + k);
            }
            out.add(p);
            i += take;
        }
        if (g.rnd.nextInt(4) == 0) {
            out.add(g.rnd.nextInt(out.size() + 1), 1L);
        }
        if (g.rnd.nextInt(3) == 0 && x.numel() > 0) {
            out.set(g.rnd.nextInt(out.size()), -1L);
        }
        return out.stream().mapToLong(Long::longValue).toArray();
    }

    /** Basic index items for {@code x}: integers, slices (with steps), a None and sometimes an ellipsis. */
    private static List<Index> index(Draw g, Val x) {
        List<Index> items = new ArrayList<>();
        int used = 1 + g.rnd.nextInt(x.ndim());
        boolean ellipsis = g.rnd.nextInt(4) == 0;
        if (ellipsis) {
            items.add(Index.ellipsis());
        }
        for (int d = 0; d < used; d++) {
            long size = x.shape[ellipsis ? x.ndim() - used + d : d];
            int r = g.rnd.nextInt(6);
            if (r == 0 && size > 0) {
                items.add(Index.at(g.rnd.nextInt((int) size) - (g.rnd.nextBoolean() ? size : 0)));
            } else if (r == 1) {
                items.add(Index.all());
            } else if (r == 2) {
                items.add(Index.none());
                d--;
                if (items.size() > 6) {
                    break;
                }
            } else {
                Long start = g.rnd.nextBoolean() ? null : (long) (g.rnd.nextInt(4) - 1);
                Long stop = g.rnd.nextBoolean() ? null : (long) (g.rnd.nextInt(9) - 2);
                items.add(Index.slice(start, stop, 1 + g.rnd.nextInt(2)));
            }
        }
        return items;
    }

    private void concatSplit(Draw g, int xi, Val x) {
        if (x.ndim() == 0) {
            return;
        }
        int d = g.dim(x);
        int r = g.rnd.nextInt(6);
        switch (r) {
            case 0, 1 -> {
                int parts = 1 + g.rnd.nextInt(2);
                int[] reads = new int[parts + 1];
                reads[0] = xi;
                for (int i = 1; i <= parts; i++) {
                    long[] s = x.shape.clone();
                    s[d] = g.size();
                    reads[i] = g.rnd.nextInt(3) == 0 ? xi : g.fresh(s, g.rnd.nextInt(4) == 0 ? g.dtype() : x.dtype, x.mesh);
                }
                g.aten("cat", "[T]|dim=i", Arrays.asList(Collections.nCopies(parts + 1, null), (long) d), false, reads);
            }
            case 2 -> {
                int y = g.fresh(x.shape, x.dtype, x.mesh);
                g.aten("stack", "[T]|dim=i", Arrays.asList(Collections.nCopies(2, null), (long) g.rnd.nextInt(x.ndim() + 1)), false, xi, y);
            }
            case 3 -> g.aten("split", "T,i|dim=i", Arrays.asList(null, (long) (1 + g.rnd.nextInt(4)), (long) d), true, xi);
            case 4 -> g.aten("chunk", "T,i|dim=i", Arrays.asList(null, (long) (1 + g.rnd.nextInt(4)), (long) d), true, xi);
            default -> {
                if (x.shape[d] <= 6) {
                    g.aten("unbind", "T|dim=i", Arrays.asList(null, (long) d), true, xi);
                }
            }
        }
    }

    private void write(Draw g, int xi, Val x) {
        if (x.view || x.viewed) {
            List<Integer> writable = new ArrayList<>();
            for (int i = 0; i < g.vals.size(); i++) {
                if (!g.vals.get(i).view && !g.vals.get(i).viewed) {
                    writable.add(i);
                }
            }
            if (writable.isEmpty()) {
                return;
            }
            xi = writable.get(g.rnd.nextInt(writable.size()));
            x = g.vals.get(xi);
        }
        int r = g.rnd.nextInt(12);
        Write.Kind[] withTensor = {Write.Kind.ADD_, Write.Kind.SUB_, Write.Kind.MUL_, Write.Kind.COPY_};
        switch (r) {
            case 0, 1, 2 -> {
                Write.Kind k = withTensor[g.rnd.nextInt(withTensor.length)];
                int y = g.fresh(g.broadcastable(x.shape), g.rnd.nextInt(3) == 0 ? g.dtype() : x.dtype, x.mesh);
                g.batch.add(new Write(k, new int[] {xi, y}, null, null));
            }
            case 3 -> g.batch.add(new Write(Write.Kind.ADD_S_, new int[] {xi}, g.scalar(x), null));
            case 4 -> g.batch.add(new Write(g.rnd.nextBoolean() ? Write.Kind.MUL_S_ : Write.Kind.DIV_S_, new int[] {xi},
                (double) (1 + g.rnd.nextInt(4)) / 2.0, null));
            case 5 -> g.batch.add(new Write(Write.Kind.FILL_, new int[] {xi}, g.quarter(), null));
            case 6 -> g.batch.add(new Write(Write.Kind.ZERO_, new int[] {xi}, null, null));
            case 7 -> {
                int m = g.fresh(g.broadcastable(x.shape), B, x.mesh);
                g.batch.add(new Write(Write.Kind.MASKED_FILL_, new int[] {xi, m}, g.quarter(), null));
            }
            default -> {
                if (x.ndim() == 0) {
                    return;
                }
                List<Index> items = index(g, x);
                if (g.rnd.nextBoolean()) {
                    g.batch.add(new Write(Write.Kind.SET_ITEM, new int[] {xi}, g.scalar(x), items));
                } else {
                    long[] box;
                    try (Tensor b = Write.indexed(g.refs.get(xi), items)) {
                        box = TorchTensors.shape(b);
                    } catch (RuntimeException refused) {
                        return;
                    }
                    int y = g.fresh(g.broadcastable(box), x.dtype, x.mesh);
                    g.batch.add(new Write(Write.Kind.SET_ITEM, new int[] {xi, y}, null, items));
                }
            }
        }
    }

    private void convolution(Draw g, int xi, Val x) {
        boolean two = x.ndim() == 4 || (x.ndim() != 3 && g.rnd.nextBoolean());
        int a = x.floating() && x.ndim() == (two ? 4 : 3) ? xi
            : g.fresh(two ? new long[] {1 + g.rnd.nextInt(3), 1 + g.rnd.nextInt(4), 3 + g.rnd.nextInt(6), 3 + g.rnd.nextInt(6)}
                : new long[] {1 + g.rnd.nextInt(3), 1 + g.rnd.nextInt(4), 3 + g.rnd.nextInt(8)}, g.floatType(), x.mesh);
        long[] s = g.shapeOf(a);
        ScalarType t = g.dtypeOf(a);
        int r = g.rnd.nextInt(4);
        if (r == 3) {
            g.aten(g.rnd.nextBoolean() ? (two ? "max_pool2d" : "max_pool1d") : (two ? "avg_pool2d" : "avg_pool1d"), "T,[i]",
                Arrays.asList(null, two ? List.of(2L, 2L) : List.of(2L)), false, a);
            return;
        }
        long k = 1 + g.rnd.nextInt(3);
        long out = 1 + g.rnd.nextInt(4);
        long[] ws = two ? new long[] {out, s[1], k, k} : new long[] {out, s[1], k};
        int w = g.fresh(ws, t, x.mesh);
        List<Long> pad = Collections.nCopies(two ? 2 : 1, (long) g.rnd.nextInt(2));
        List<Long> stride = Collections.nCopies(two ? 2 : 1, 1L);
        if (r == 0) {
            int b = g.fresh(new long[] {out}, t, x.mesh);
            g.aten(two ? "conv2d" : "conv1d", "T,T,T,[i],[i]", Arrays.asList(null, null, null, stride, pad), false, a, w, b);
        } else {
            g.aten(two ? "conv2d" : "conv1d", "T,T,n,[i],[i]", Arrays.asList(null, null, null, stride, pad), false, a, w);
        }
    }

    /**
     * Attention of a query (the value itself when it is floating and 4-d with no empty dimension), keys and values. No
     * dimension is empty: libtorch's CPU flash attention divides by a zero size and the process dies of SIGFPE, one
     * device's torch as much as a worker.
     */
    private void attention(Draw g, int xi, Val x) {
        int q = x.floating() && x.ndim() == 4 && Arrays.stream(x.shape).allMatch(d -> d > 0) ? xi
            : g.fresh(new long[] {1 + g.rnd.nextInt(3), 1 + g.rnd.nextInt(4), 1 + g.rnd.nextInt(7), 1 + g.rnd.nextInt(6)}, g.floatType(), x.mesh);
        long[] s = g.shapeOf(q);
        ScalarType t = g.dtypeOf(q);
        long[] kv = {s[0], s[1], g.rnd.nextBoolean() ? s[2] : 1 + g.rnd.nextInt(7), s[3]};
        int k = g.fresh(kv, t, x.mesh);
        int v = g.fresh(kv, t, x.mesh);
        if (g.rnd.nextBoolean()) {
            g.aten("scaled_dot_product_attention", "T,T,T", Arrays.asList(null, null, null), false, q, k, v);
        } else {
            g.aten("scaled_dot_product_attention", "T,T,T|is_causal=b", Arrays.asList(null, null, null, true), false, q, k, v);
        }
    }
}
