package org.dtorch.ops.aten;

import java.util.List;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;

/**
 * The unboxed libtorch functions of the operators a model's step calls most (linear and the matrix products, the views
 * and concatenations of attention, its normalization, softmax and activation, the embedding, and the last two's
 * gradients), which {@link AtenCall#call} runs instead of the dispatcher's boxed call: the same operator through the same dispatcher,
 * without an {@code IValue} per argument and the boxed calling convention, which cost a small operator a good part of
 * its host time (DirectCallsBenchmark). Two of them reach the same values a cheaper way than libtorch's own call:
 * grouped-query attention without a mask through the plain call, which has a fused kernel
 * ({@link #groupedQueryAttention}), and a linear layer's weight-gradient {@code einsum} as one matrix product. Every
 * other overload, and a call whose arguments these functions cannot take as given (a constant of another type than the
 * schema's usual one), stays boxed.
 *
 * <p>Thread-safe: no state of its own; optional arguments go through the calling thread's {@link ThreadOptionals}.
 */
final class DirectCalls {
    /** An overload's unboxed function: its one result, or null when this call's arguments need the boxed call. */
    interface Direct {
        Tensor run(AtenCall call, List<Tensor> tensors);
    }

    private DirectCalls() {
    }

    /** The unboxed function of {@code overload}, or null where there is none. */
    static Direct of(Overload overload) {
        return switch (overload.name() + "." + overload.overloadName()) {
            case "linear." -> DirectCalls::linear;
            case "silu." -> (c, t) -> torch.silu(t.getFirst());
            case "silu_backward." -> (c, t) -> torch.silu_backward(t.get(0), t.get(1));
            case "transpose.int" -> DirectCalls::transpose;
            case "view." -> (c, t) -> c.constantValue(1) instanceof long[] size ? t.getFirst().view(size) : null;
            case "reshape." -> (c, t) -> c.constantValue(1) instanceof long[] shape ? t.getFirst().reshape(shape) : null;
            case "slice.Tensor" -> DirectCalls::slice;
            case "rms_norm." -> DirectCalls::rmsNorm;
            case "scaled_dot_product_attention." -> DirectCalls::attention;
            case "mm." -> (c, t) -> t.get(0).mm(t.get(1));
            case "bmm." -> (c, t) -> t.get(0).bmm(t.get(1));
            case "matmul." -> (c, t) -> t.get(0).matmul(t.get(1));
            case "t." -> (c, t) -> t.getFirst().t();
            case "unsqueeze." -> (c, t) -> c.constantValue(1) instanceof Long d ? t.getFirst().unsqueeze(d) : null;
            case "select.int" -> (c, t) -> c.constantValue(1) instanceof Long d && c.constantValue(2) instanceof Long i ? t.getFirst().select(d, i) : null;
            case "permute." -> (c, t) -> c.constantValue(1) instanceof long[] dims ? t.getFirst().permute(dims) : null;
            case "expand." -> (c, t) -> c.constantValue(1) instanceof long[] size && c.constantValue(2) instanceof Boolean implicit
                ? t.getFirst().expand(size, implicit) : null;
            case "softmax.int" -> (c, t) -> c.constantValue(1) instanceof Long d && c.constantValue(2) == null ? t.getFirst().softmax(d) : null;
            case "log_softmax.int" -> (c, t) -> c.constantValue(1) instanceof Long d && c.constantValue(2) == null ? t.getFirst().log_softmax(d) : null;
            case "cat." -> DirectCalls::cat;
            case "embedding." -> DirectCalls::embedding;
            case "einsum." -> DirectCalls::einsum;
            case "constant_pad_nd." -> DirectCalls::constantPad;
            case "index_add." -> DirectCalls::indexAdd;
            default -> null;
        };
    }

    private static Tensor linear(AtenCall call, List<Tensor> t) {
        return switch (t.size()) {
            case 2 -> torch.linear(t.get(0), t.get(1));
            case 3 -> torch.linear(t.get(0), t.get(1), t.get(2));
            default -> null;
        };
    }

    /** {@code index_add(self, dim, index, source, alpha=1)} with the default alpha (an embedding's weight gradient). */
    private static Tensor indexAdd(AtenCall call, List<Tensor> t) {
        return call.constantValue(1) instanceof Long dim && call.constantValue(4) instanceof Number alpha && alpha.doubleValue() == 1.0
            ? torch.index_add(t.get(0), dim, t.get(1), t.get(2)) : null;
    }

    /** {@code cat(tensors, dim=0)}: the call's inputs are the list's tensors. */
    private static Tensor cat(AtenCall call, List<Tensor> t) {
        if (t.isEmpty() || !(call.constantValue(1) instanceof Long dim)) {
            return null;
        }
        try (TensorVector tensors = new TensorVector(t.toArray(Tensor[]::new))) {
            return torch.cat(tensors, dim);
        }
    }

    /** {@code embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False)}. */
    private static Tensor embedding(AtenCall call, List<Tensor> t) {
        return call.constantValue(2) instanceof Long padding && call.constantValue(3) instanceof Boolean scale
            && call.constantValue(4) instanceof Boolean sparse ? torch.embedding(t.get(0), t.get(1), padding, scale, sparse) : null;
    }

    /**
     * {@code einsum(equation, tensors, path=None)}; a linear layer's weight gradient {@code "ABo,ABi->oi"} (the same
     * leading labels on both, summed away) as one matrix product of the two flattened to 2-d, where libtorch's einsum
     * parses the equation and permutes, reshapes and multiplies in batches (two thirds of its host time on an H100).
     */
    private static Tensor einsum(AtenCall call, List<Tensor> t) {
        if (!(call.constantValue(0) instanceof String equation) || call.constantValue(2) != null || t.isEmpty()) {
            return null;
        }
        if (t.size() == 2 && isWeightGradient(equation, t.get(0), t.get(1))) {
            long out = t.get(0).size(-1);
            long in = t.get(1).size(-1);
            try (Tensor g = t.get(0).reshape(-1, out); Tensor gT = g.t(); Tensor x = t.get(1).reshape(-1, in)) {
                return gT.mm(x);
            }
        }
        try (TensorVector tensors = new TensorVector(t.toArray(Tensor[]::new))) {
            return torch.einsum(equation, tensors);
        }
    }

    /**
     * True for {@code L o, L i -> o i} with {@code L} distinct upper-case labels, one per leading dimension of both
     * tensors, and {@code o} and {@code i} not empty (a flattening to 2-d needs a known last size).
     */
    static boolean isWeightGradient(String equation, Tensor g, Tensor x) {
        int comma = equation.indexOf(',');
        if (comma < 1 || !equation.endsWith("->oi") || comma + 1 > equation.length() - 4) {
            return false;
        }
        String left = equation.substring(0, comma);
        String right = equation.substring(comma + 1, equation.length() - 4);
        int lead = left.length() - 1;
        if (!left.endsWith("o") || !right.equals(left.substring(0, lead) + "i") || g.dim() != lead + 1 || x.dim() != lead + 1
            || g.size(-1) == 0 || x.size(-1) == 0) {
            return false;
        }
        for (int k = 0; k < lead; k++) {
            char c = left.charAt(k);
            if (c < 'A' || c > 'Z' || left.indexOf(c) != k) {
                return false;
            }
        }
        return true;
    }

    /** {@code constant_pad_nd(self, pad, value=0)}. */
    private static Tensor constantPad(AtenCall call, List<Tensor> t) {
        if (!(call.constantValue(1) instanceof long[] pad)) {
            return null;
        }
        Object value = call.constantValue(2);
        if (value == null) {
            return torch.constant_pad_nd(t.getFirst(), pad);
        }
        Scalar fill = value instanceof Double d ? new Scalar(d.doubleValue()) : value instanceof Long l ? new Scalar(l.longValue()) : null;
        if (fill == null) {
            return null;
        }
        try (fill) {
            return torch.constant_pad_nd(t.getFirst(), pad, fill);
        }
    }

    private static Tensor transpose(AtenCall call, List<Tensor> t) {
        return call.constantValue(1) instanceof Long a && call.constantValue(2) instanceof Long b ? t.getFirst().transpose(a, b) : null;
    }

    /** {@code slice.Tensor(self, dim=0, start=None, end=None, step=1)}. */
    private static Tensor slice(AtenCall call, List<Tensor> t) {
        Object dim = call.constantValue(1);
        Object start = call.constantValue(2);
        Object end = call.constantValue(3);
        Object step = call.constantValue(4);
        if (!(dim instanceof Long d && step instanceof Long s && (start == null || start instanceof Long) && (end == null || end instanceof Long))) {
            return null;
        }
        ThreadOptionals optional = ThreadOptionals.get();
        return t.getFirst().slice(d, optional.start((Long) start), optional.end((Long) end), s);
    }

    /** {@code rms_norm(input, normalized_shape, weight=None, eps=None)}. */
    private static Tensor rmsNorm(AtenCall call, List<Tensor> t) {
        Object shape = call.constantValue(1);
        Object eps = call.constantValue(3);
        if (!(shape instanceof long[] normalized) || !(eps == null || eps instanceof Double) || t.size() > 2) {
            return null;
        }
        ThreadOptionals optional = ThreadOptionals.get();
        try {
            return torch.rms_norm(t.getFirst(), normalized, optional.tensor(t.size() == 2 ? t.get(1) : null), optional.number((Double) eps));
        } finally {
            optional.clearTensor();
        }
    }

    /** {@code scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)}. */
    private static Tensor attention(AtenCall call, List<Tensor> t) {
        Object dropout = call.constantValue(4);
        Object causal = call.constantValue(5);
        Object scale = call.constantValue(6);
        Object gqa = call.constantValue(7);
        if (!(dropout instanceof Double p && causal instanceof Boolean isCausal && gqa instanceof Boolean enableGqa
            && (scale == null || scale instanceof Double)) || t.size() > 4) {
            return null;
        }
        ThreadOptionals optional = ThreadOptionals.get();
        TensorOptional mask = optional.tensor(t.size() == 4 ? t.get(3) : null);
        DoubleOptional s = optional.number((Double) scale);
        try {
            if (enableGqa && t.size() == 3 && p == 0) {
                Tensor grouped = groupedQueryAttention(t.get(0), t.get(1), t.get(2), mask, isCausal, s);
                if (grouped != null) {
                    return grouped;
                }
            }
            return torch.scaled_dot_product_attention(t.get(0), t.get(1), t.get(2), mask, p, isCausal, s, enableGqa);
        } finally {
            optional.clearTensor();
        }
    }

    /**
     * Grouped-query attention without a mask or dropout through libtorch's plain call, which takes a fused kernel where
     * the device has one; libtorch's grouped call runs its math backend instead (a copy of the keys and values per query
     * head, then about ten kernels: 125 us of host time a call on an H100, in PyTorch eager too). Without causality every
     * query of a group's heads attends to the same keys independently, so {@code q [b, hq, L, e]} is read as
     * {@code [b, hkv, hq / hkv * L, e]} (a group's heads one after another, as {@code enable_gqa} pairs them) and the
     * result read back as {@code [b, hq, L, ev]}: no copy at all for a decode step. With causality, where a query's
     * position matters, the keys and values are repeated per query head ({@code [b, hkv, S, e]} to {@code [b, hq, S, e]},
     * head {@code i} reading key/value head {@code i / (hq / hkv)}). The same values as the grouped call, to rounding.
     * Null where the shapes are not the plain 4-d ones this needs.
     */
    static Tensor groupedQueryAttention(Tensor q, Tensor k, Tensor v, TensorOptional noMask, boolean causal, DoubleOptional scale) {
        if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) {
            return null;
        }
        long heads = q.size(1);
        long kvHeads = k.size(1);
        if (kvHeads == heads || kvHeads == 0 || heads % kvHeads != 0 || v.size(1) != kvHeads || k.size(0) != q.size(0)
            || v.size(0) != q.size(0)) {
            return null;
        }
        long batch = q.size(0);
        long tokens = q.size(2);
        if (causal) {
            try (Tensor keys = repeatHeads(k, heads / kvHeads); Tensor values = repeatHeads(v, heads / kvHeads)) {
                return torch.scaled_dot_product_attention(q, keys, values, noMask, 0, true, scale, false);
            }
        }
        try (Tensor groups = q.reshape(batch, kvHeads, heads / kvHeads * tokens, q.size(3));
             Tensor out = torch.scaled_dot_product_attention(groups, k, v, noMask, 0, false, scale, false)) {
            return out.reshape(batch, heads, tokens, out.size(3));
        }
    }

    /** {@code t [b, h, s, e]} with each head repeated {@code times} times in a row: {@code [b, h * times, s, e]}. */
    private static Tensor repeatHeads(Tensor t, long times) {
        long[] wide = {t.size(0), t.size(1), times, t.size(2), t.size(3)};
        try (Tensor one = t.unsqueeze(2); Tensor repeated = one.expand(wide, false)) {
            return repeated.reshape(t.size(0), t.size(1) * times, t.size(2), t.size(3));
        }
    }
}
