package org.dtorch.ops.difftest;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.Index;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.ops.aten.AtenCall;

/**
 * One of {@link DTensor}'s own methods (the hand-written operators, and the shape methods and casts the API offers by
 * name) on the values {@code reads}; {@code arg} is the method's other argument: a {@code Long} or {@code Double} for the
 * scalar forms, {@link Dims} for {@code sum} and {@code mean}, a {@code long[]} for dimensions and shapes, a
 * {@code ScalarType} for {@code to}, a list of {@link Index} items for {@code getItem}. The reference is the ATen
 * operator the method stands for.
 *
 * <p>Immutable. Thread-safe.
 */
public record MethodStep(Kind kind, int[] reads, Object arg) implements Step {
    /** The methods. */
    public enum Kind {
        ADD, SUB, MUL, MATMUL, GT, LT, EQ, NE,
        ADD_S, SUB_S, MUL_S, DIV_S, RSUB_S, GT_S,
        NEG, RELU, SILU, GELU, EXP, TANH, SIGMOID,
        SUM, MEAN, MAX_ALL, SOFTMAX,
        TRANSPOSE, PERMUTE, RESHAPE, VIEW, NARROW, TO, GET_ITEM;

        boolean binary() {
            return ordinal() <= NE.ordinal();
        }

        boolean scalar() {
            return ordinal() >= ADD_S.ordinal() && ordinal() <= GT_S.ordinal();
        }

        boolean unary() {
            return ordinal() >= NEG.ordinal() && ordinal() <= SIGMOID.ordinal();
        }

        String method() {
            return switch (this) {
                case ADD, ADD_S -> "add";
                case SUB, SUB_S -> "sub";
                case MUL, MUL_S -> "mul";
                case DIV_S -> "div";
                case RSUB_S -> "rsub";
                case GT, GT_S -> "gt";
                case MAX_ALL -> "max";
                default -> name().toLowerCase(Locale.ROOT);
            };
        }
    }

    /** The dimensions of a reduction (none: all of them) and whether they are kept. */
    public record Dims(int[] dims, boolean keepdim) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Dims d && Arrays.equals(dims, d.dims) && keepdim == d.keepdim;
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(dims) + (keepdim ? 1 : 0);
        }

        @Override
        public String toString() {
            return Arrays.toString(dims) + (keepdim ? " keepdim" : "");
        }
    }

    public MethodStep {
        reads = reads.clone();
    }

    @Override
    public int[] reads() {
        return reads.clone();
    }

    @Override
    public int outputs() {
        return 1;
    }

    @Override
    public Step withReads(int[] others) {
        return new MethodStep(kind, others, arg);
    }

    @Override
    public boolean aliases() {
        return kind.ordinal() >= Kind.TRANSPOSE.ordinal();
    }

    private long[] ints() {
        return (long[]) arg;
    }

    @Override
    public List<DTensor> run(DTorch dt, List<DeviceMesh> meshes, List<DTensor> in) {
        DTensor a = in.getFirst();
        DTensor b = in.size() > 1 ? in.get(1) : null;
        Number n = arg instanceof Number x ? x : null;
        boolean exact = n instanceof Long;
        DTensor out = switch (kind) {
            case ADD -> a.add(b);
            case SUB -> a.sub(b);
            case MUL -> a.mul(b);
            case MATMUL -> a.matmul(b);
            case GT -> a.gt(b);
            case LT -> a.lt(b);
            case EQ -> a.eq(b);
            case NE -> a.ne(b);
            case ADD_S -> exact ? a.add(n.longValue()) : a.add(n.doubleValue());
            case SUB_S -> exact ? a.sub(n.longValue()) : a.sub(n.doubleValue());
            case MUL_S -> exact ? a.mul(n.longValue()) : a.mul(n.doubleValue());
            case DIV_S -> a.div(n.doubleValue());
            case RSUB_S -> exact ? a.rsub(n.longValue()) : a.rsub(n.doubleValue());
            case GT_S -> exact ? a.gt(n.longValue()) : a.gt(n.doubleValue());
            case NEG -> a.neg();
            case RELU -> a.relu();
            case SILU -> a.silu();
            case GELU -> a.gelu();
            case EXP -> a.exp();
            case TANH -> a.tanh();
            case SIGMOID -> a.sigmoid();
            case SUM -> a.sum(((Dims) arg).dims(), ((Dims) arg).keepdim());
            case MEAN -> a.mean(((Dims) arg).dims(), ((Dims) arg).keepdim());
            case MAX_ALL -> a.max();
            case SOFTMAX -> a.softmax((int) ints()[0]);
            case TRANSPOSE -> a.transpose((int) ints()[0], (int) ints()[1]);
            case PERMUTE -> a.permute(Arrays.stream(ints()).mapToInt(x -> (int) x).toArray());
            case RESHAPE -> a.reshape(ints());
            case VIEW -> a.view(ints());
            case NARROW -> a.narrow((int) ints()[0], ints()[1], ints()[2]);
            case TO -> a.to((ScalarType) arg);
            case GET_ITEM -> a.getItem(index().toArray(Index[]::new));
        };
        return List.of(out);
    }

    @SuppressWarnings("unchecked")
    private List<Index> index() {
        return (List<Index>) arg;
    }

    /** The ATen call the method stands for (none for {@code to} and {@code getItem}). */
    private AtenCall call() {
        String m = kind.method();
        if (kind.binary()) {
            return AtenCall.of(m, "T,T", null, null);
        }
        if (kind.scalar()) {
            return AtenCall.of(m, arg instanceof Long ? "T,i" : "T,f", null, arg);
        }
        if (kind.unary() || kind == Kind.MAX_ALL) {
            return AtenCall.of(m, "T", (Object) null);
        }
        return switch (kind) {
            case SUM, MEAN -> {
                Dims d = (Dims) arg;
                yield d.dims().length == 0 ? AtenCall.of(m, "T", (Object) null)
                    : AtenCall.of(m, "T|dim=[i]|keepdim=b", null, Arrays.stream(d.dims()).mapToObj(x -> (long) x).toList(), d.keepdim());
            }
            case SOFTMAX -> AtenCall.of(m, "T,i", null, ints()[0]);
            case TRANSPOSE -> AtenCall.of(m, "T,i,i", null, ints()[0], ints()[1]);
            case PERMUTE, RESHAPE, VIEW -> AtenCall.of(m, "T,[i]", null, Arrays.stream(ints()).boxed().toList());
            case NARROW -> AtenCall.of(m, "T,i,i,i", null, ints()[0], ints()[1], ints()[2]);
            default -> throw new IllegalStateException(kind + " has no ATen call");
        };
    }

    @Override
    public List<Tensor> reference(List<Tensor> in) {
        Tensor a = in.getFirst();
        if (kind == Kind.TO) {
            return List.of(a.to((ScalarType) arg));
        }
        if (kind == Kind.GET_ITEM) {
            return List.of(Write.indexed(a, index()));
        }
        return call().call(in);
    }

    @Override
    public String python(List<String> in, List<String> out, boolean distributed) {
        String a = in.getFirst();
        String expr;
        if (kind.binary()) {
            expr = a + "." + kind.method() + "(" + in.get(1) + ")";
        } else if (kind.scalar()) {
            expr = a + "." + kind.method() + "(" + Py.number((Number) arg) + ")";
        } else if (kind.unary()) {
            expr = a + "." + kind.method() + "()";
        } else {
            expr = switch (kind) {
                case SUM, MEAN -> {
                    Dims d = (Dims) arg;
                    String dims = distributed ? Arrays.toString(d.dims()).replace('[', '(').replace("]", d.dims().length == 1 ? ",)" : ")")
                        : Py.ints(d.dims());
                    yield a + "." + kind.method() + (d.dims().length == 0 ? "()" : "(dim=" + dims + ", keepdim=" + (d.keepdim() ? "True" : "False") + ")");
                }
                case MAX_ALL -> a + ".max()";
                case TO -> a + ".to(" + Py.dtype((ScalarType) arg) + ")";
                case GET_ITEM -> a + "[" + Py.index(index()) + "]";
                default -> a + "." + kind.method() + "(" + String.join(", ", Arrays.stream(ints()).mapToObj(Long::toString).toList()) + ")";
            };
        }
        return out.getFirst() + " = " + expr;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof MethodStep m && kind == m.kind && Arrays.equals(reads, m.reads) && Objects.deepEquals(arg, m.arg);
    }

    @Override
    public int hashCode() {
        return kind.hashCode() * 31 + Arrays.hashCode(reads);
    }

    @Override
    public String toString() {
        Object shown = arg instanceof long[] l ? Arrays.toString(l) : arg;
        return kind.method() + (shown == null ? "" : " " + shown) + " on " + Arrays.toString(reads);
    }

    static List<Index> items(Index... items) {
        return new ArrayList<>(List.of(items));
    }
}
