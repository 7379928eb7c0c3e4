package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.v;

import java.util.List;
import org.bytedeco.pytorch.GradMode;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.AttentionBackwardSpec;
import org.dtorch.ops.AttentionGraphSpec;
import org.dtorch.ops.aten.AtenCall;

/**
 * The derivative of {@code scaled_dot_product_attention} without dropout. A recorded call runs as
 * {@link AttentionGraphSpec}, whose devices keep libtorch's graph of the call: a pass that only computes gradients takes
 * them from one operator, {@link AttentionBackwardSpec}, which runs that graph's backward on every device (the forward is
 * not run again). A pass that records its gradients' graph (create_graph) needs operators with derivatives of their
 * own, so it uses the decomposition: the attention weights {@code p = softmax(q k^T * scale + mask)} are recomputed from
 * the saved inputs, then {@code gv = p^T g}, {@code gs = p * (gp - sum(gp * p, -1)) * scale} with {@code gp = g v^T},
 * {@code gq = gs k}, {@code gk = gs^T q}. Grouped-query attention repeats each key and value head for its group of query
 * heads, and sums the group's gradients back.
 *
 * <p>Thread-safe: stateless.
 */
final class Attention {
    private Attention() {
    }

    /**
     * The recorded forward of {@code call} on {@code inputs}: the call run keeping its graph on the devices, and the
     * derivative that runs that graph's backward; null where the call has dropout (no derivative) or none of query, key
     * and value requires grad.
     */
    static SavedForward saving(AtenCall call, DTensor[] inputs) {
        if (!AttentionGraphSpec.takes(call) || inputs.length < 3 || !(needsGrad(inputs[0]) || needsGrad(inputs[1]) || needsGrad(inputs[2]))) {
            return null; // no derivative, or no gradient of query, key or value to compute (a mask's alone)
        }
        List<DTensor> all = inputs[0].runtime().applyMulti(new AttentionGraphSpec(call), inputs);
        List<DTensor> leaves = List.copyOf(all.subList(1, 4));
        return new SavedForward(List.of(all.getFirst()), (in, out, g, n) -> {
            if (GradMode.is_enabled()) { // only a pass that records its gradients' graph: the decomposition, built then
                return of(call, call.inputNames()).apply(in, out, g, n);
            }
            List<DTensor> grads = AttentionBackwardSpec.gradients(g[0], out[0], leaves, out[0].runtime().autograd().retainsGraph());
            DTensor[] result = new DTensor[in.length];
            for (int i = 0; i < 3; i++) {
                result[i] = n[i] ? grads.get(i) : null;
            }
            return result;
        }, leaves);
    }

    private static boolean needsGrad(DTensor t) {
        return t != null && t.requiresGrad();
    }

    /** The decomposition, for a pass that records its gradients' graph; null with dropout. */
    static Derivative of(AtenCall call, List<String> names) {
        Object dropout = call.constant("dropout_p");
        if (dropout instanceof Number d && d.doubleValue() != 0.0) {
            return null;
        }
        boolean causal = Boolean.TRUE.equals(call.constant("is_causal"));
        Object scaleValue = call.constant("scale");
        boolean hasMask = names.contains("attn_mask");
        return (in, out, g, n) -> {
            DTensor q = in[0];
            DTensor k = in[1];
            DTensor v = in[2];
            DTensor mask = hasMask ? in[names.indexOf("attn_mask")] : null;
            long headDim = q.size(-1);
            double scale = scaleValue instanceof Number s ? s.doubleValue() : 1.0 / Math.sqrt(headDim);
            int groups = q.ndim() >= 3 && k.ndim() >= 3 ? (int) (q.size(-3) / k.size(-3)) : 1;
            DTensor kr = repeatHeads(k, groups);
            DTensor vr = repeatHeads(v, groups);
            DTensor scores = q.matmul(Grads.transposeLast(kr)).mul(scale);
            if (mask != null) {
                scores = mask.dtype() == ScalarType.Bool
                    ? aten("masked_fill", "T,T,f", v(null, null, Double.NEGATIVE_INFINITY), scores, mask.logicalNot())
                    : scores.add(mask);
            }
            if (causal) {
                long l = q.size(-2);
                long s = k.size(-2);
                Placement[] whole = new Placement[q.mesh().ndim()];
                java.util.Arrays.fill(whole, Placement.replicate());
                DTensor ones = q.runtime().ones(new long[] {l, s}, ScalarType.Bool, q.mesh(), whole);
                DTensor allowed = aten("tril", "T", v((Object) null), ones);
                scores = aten("masked_fill", "T,T,f", v(null, null, Double.NEGATIVE_INFINITY), scores, allowed.logicalNot());
            }
            DTensor p = aten("_softmax", "T,i,b", v(null, -1L, false), scores);
            DTensor[] result = new DTensor[in.length];
            if (n[2]) {
                result[2] = unrepeatHeads(Grads.transposeLast(p).matmul(g[0]), v.shape(), groups);
            }
            if (n[0] || n[1]) {
                DTensor gp = g[0].matmul(Grads.transposeLast(vr));
                // softmax's derivative as a formula of operators with derivatives of their own (this pass is differentiated)
                DTensor gs = p.mul(gp.sub(gp.mul(p).sum(new int[] {-1}, true))).mul(scale);
                if (n[0]) {
                    result[0] = gs.matmul(kr);
                }
                if (n[1]) {
                    result[1] = unrepeatHeads(Grads.transposeLast(gs).matmul(q), k.shape(), groups);
                }
            }
            return result;
        };
    }

    /** Each head of {@code t} (dimension -3) repeated {@code groups} times in place: {@code repeat_interleave}'s layout. */
    private static DTensor repeatHeads(DTensor t, int groups) {
        if (groups == 1) {
            return t;
        }
        long[] shape = t.shape();
        int h = shape.length - 3;
        long[] expanded = new long[shape.length + 1];
        long[] merged = shape.clone();
        for (int i = 0, j = 0; i < shape.length; i++) {
            expanded[j++] = shape[i];
            if (i == h) {
                expanded[j++] = groups;
            }
        }
        merged[h] = shape[h] * groups;
        DTensor u = aten("unsqueeze", "T,i", v(null, (long) h + 1), t);
        return Grads.expand(u, expanded).reshape(merged);
    }

    /** The gradient of {@link #repeatHeads}: each group's heads summed back into the head they repeat. */
    private static DTensor unrepeatHeads(DTensor g, long[] shape, int groups) {
        if (groups == 1) {
            return g;
        }
        int h = shape.length - 3;
        long[] split = new long[shape.length + 1];
        for (int i = 0, j = 0; i < shape.length; i++) {
            split[j++] = shape[i];
            if (i == h) {
                split[j++] = groups;
            }
        }
        return g.reshape(split).sum(new int[] {h + 1}, false);
    }

}
