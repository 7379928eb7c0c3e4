package org.dtorch.ops.difftest;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.Index;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.ops.aten.AtenCall;

/**
 * An in-place write into the value {@code reads[0]}: with the value {@code reads[1]} (an operand, a mask or a source),
 * or with the number {@code scalar}, into the box {@code index} for {@code setItem}.
 *
 * <p>Immutable. Thread-safe.
 */
public record Write(Kind kind, int[] reads, Number scalar, List<Index> index) implements Step {
    /** The writes. */
    public enum Kind {
        ADD_, SUB_, MUL_, ADD_S_, MUL_S_, DIV_S_, FILL_, ZERO_, MASKED_FILL_, COPY_, SET_ITEM;

        String method() {
            return switch (this) {
                case ADD_S_ -> "add_";
                case MUL_S_ -> "mul_";
                case DIV_S_ -> "div_";
                case MASKED_FILL_ -> "masked_fill_";
                default -> name().toLowerCase(java.util.Locale.ROOT);
            };
        }
    }

    public Write {
        reads = reads.clone();
        index = index == null ? null : List.copyOf(index);
    }

    @Override
    public int[] reads() {
        return reads.clone();
    }

    @Override
    public int outputs() {
        return 0;
    }

    @Override
    public boolean writes() {
        return true;
    }

    @Override
    public Step withReads(int[] others) {
        return new Write(kind, others, scalar, index);
    }

    @Override
    public List<DTensor> run(DTorch dt, List<DeviceMesh> meshes, List<DTensor> in) {
        DTensor t = in.getFirst();
        DTensor o = in.size() > 1 ? in.get(1) : null;
        boolean exact = scalar instanceof Long;
        switch (kind) {
            case ADD_ -> t.add_(o);
            case SUB_ -> t.sub_(o);
            case MUL_ -> t.mul_(o);
            case ADD_S_ -> {
                if (exact) {
                    t.add_(scalar.longValue());
                } else {
                    t.add_(scalar.doubleValue());
                }
            }
            case MUL_S_ -> t.mul_(scalar.doubleValue());
            case DIV_S_ -> t.div_(scalar.doubleValue());
            case FILL_ -> t.fill_(scalar.doubleValue());
            case ZERO_ -> t.zero_();
            case MASKED_FILL_ -> t.maskedFill_(o, scalar.doubleValue());
            case COPY_ -> t.copy_(o);
            case SET_ITEM -> {
                Index[] items = index.toArray(Index[]::new);
                if (o != null) {
                    t.setItem(o, items);
                } else if (exact) {
                    t.setItem(scalar.longValue(), items);
                } else {
                    t.setItem(scalar.doubleValue(), items);
                }
            }
            default -> throw new IllegalStateException(kind.toString());
        }
        return List.of();
    }

    @Override
    public List<Tensor> reference(List<Tensor> in) {
        Tensor t = in.getFirst();
        Tensor o = in.size() > 1 ? in.get(1) : null;
        // In-place methods return a reference to their own tensor (C++ Tensor&), which must not be closed.
        try (Scalar s = scalar == null ? null : scalar instanceof Long l ? new Scalar(l) : new Scalar(scalar.doubleValue())) {
            switch (kind) {
                case ADD_ -> t.add_(o);
                case SUB_ -> t.sub_(o);
                case MUL_ -> t.mul_(o);
                case ADD_S_ -> t.add_(s);
                case MUL_S_ -> t.mul_(s);
                case DIV_S_ -> t.div_(s);
                case FILL_ -> t.fill_(s);
                case ZERO_ -> t.zero_();
                case MASKED_FILL_ -> t.masked_fill_(o, s);
                case COPY_ -> t.copy_(o);
                case SET_ITEM -> {
                    try (Tensor box = indexed(t, index)) {
                        if (o != null) {
                            box.copy_(o);
                        } else {
                            box.fill_(s);
                        }
                    }
                }
                default -> throw new IllegalStateException(kind.toString());
            }
        }
        return List.of();
    }

    /** {@code t[items]} as Python's basic indexing makes it: a view of {@code t} (select, slice, unsqueeze). */
    static Tensor indexed(Tensor t, List<Index> items) {
        long consumed = items.stream().filter(i -> i instanceof Index.At || i instanceof Index.Slice).count();
        Tensor cur = t.alias();
        int dim = 0;
        for (Index item : items) {
            Tensor next = switch (item) {
                case Index.At a -> AtenCall.of("select", "T,i,i", null, (long) dim, a.index()).call(List.of(cur)).getFirst();
                case Index.Slice s -> AtenCall.of("slice", "T,i," + (s.start() == null ? "n" : "i") + "," + (s.stop() == null ? "n" : "i") + ",i",
                    null, (long) dim, s.start(), s.stop(), s.step()).call(List.of(cur)).getFirst();
                case Index.NewAxis n -> AtenCall.of("unsqueeze", "T,i", null, (long) dim).call(List.of(cur)).getFirst();
                case Index.Ellipsis e -> null;
            };
            if (item instanceof Index.Ellipsis) {
                dim += (int) (t.dim() - consumed);
                continue;
            }
            if (!(item instanceof Index.At)) {
                dim++;
            }
            cur.close();
            cur = next;
        }
        return cur;
    }

    @Override
    public String python(List<String> in, List<String> out, boolean distributed) {
        String t = in.getFirst();
        return switch (kind) {
            case ADD_, SUB_, MUL_, COPY_ -> t + "." + kind.method() + "(" + in.get(1) + ")";
            case ADD_S_, MUL_S_, DIV_S_, FILL_ -> t + "." + kind.method() + "(" + Py.number(kind == Kind.ADD_S_ ? scalar : scalar.doubleValue()) + ")";
            case ZERO_ -> t + ".zero_()";
            case MASKED_FILL_ -> t + ".masked_fill_(" + in.get(1) + ", " + Py.number(scalar.doubleValue()) + ")";
            case SET_ITEM -> t + "[" + Py.index(index) + "] = " + (in.size() > 1 ? in.get(1) : Py.number(scalar));
        };
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Write w && kind == w.kind && Arrays.equals(reads, w.reads) && Objects.equals(scalar, w.scalar) && Objects.equals(index, w.index);
    }

    @Override
    public int hashCode() {
        return kind.hashCode() * 31 + Arrays.hashCode(reads);
    }

    @Override
    public String toString() {
        return kind.method() + (scalar == null ? "" : " " + scalar) + (index == null ? "" : " " + index) + " into " + Arrays.toString(reads);
    }
}
