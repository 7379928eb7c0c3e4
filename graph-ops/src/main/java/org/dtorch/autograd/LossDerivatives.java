package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.v;

import java.util.Arrays;
import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.ops.aten.AtenCall;

/**
 * The derivatives of the classification losses, {@code cross_entropy_loss} and {@code nll_loss}/{@code nll_loss_nd}, in
 * every form torch takes: logits of one dimension ({@code (C)}), two ({@code (N, C)}) or more ({@code (N, C, d1, ...)}),
 * class indices or class probabilities as targets, class weights, {@code ignore_index}, label smoothing and the three
 * reductions.
 *
 * <p>Both go through ATen's {@code nll_loss_backward}, which takes two dimensions at most: logits of more are taken with
 * their classes last and the other dimensions flattened, {@code (N * d1 * ..., C)}, whose loss is the same sum over the
 * same terms and the same total weight. The rest follows the composition torch's {@code cross_entropy} is: with
 * {@code logp = log_softmax(x, classes)}, label smoothing {@code e} over {@code C} classes adds
 * {@code (e / C) * -sum_c(w_c * logp_c)} per kept target to {@code (1 - e) * nll}, reduced as the loss is (a mean over the
 * total weight of the kept targets, which is {@code nll_loss_forward}'s); class probabilities {@code p} give
 * {@code -sum_c(w_c * p'_c * logp_c)} with {@code p' = (1 - e) p + e / C}, a mean over the number of positions
 * ({@code numel / C}). The gradient with respect to {@code logp} then goes through {@code _log_softmax_backward_data}.
 *
 * <p>Thread-safe: stateless.
 */
final class LossDerivatives {
    private static final long NONE = 0;
    private static final long MEAN = 1;

    private LossDerivatives() {
    }

    /** The derivative of {@code cross_entropy_loss}: its logits, and its target where that holds class probabilities. */
    static Derivative crossEntropy(AtenCall call, List<String> names, DTensor[] inputs) {
        double smoothing = call.constant("label_smoothing") instanceof Number s ? s.doubleValue() : 0.0;
        long reduction = (Long) call.constant("reduction");
        long ignore = (Long) call.constant("ignore_index");
        boolean hasWeight = names.contains("weight");
        boolean probabilities = floating(inputs[1]);
        return (in, out, g, n) -> {
            DTensor x = in[0];
            int classDim = x.ndim() == 1 ? 0 : 1;
            long classes = x.size(classDim);
            DTensor logp = aten("log_softmax", "T,i", v(null, (long) classDim), x);
            DTensor weight = hasWeight ? alongClasses(in[2], x.ndim(), classDim) : null;
            DTensor[] result = new DTensor[in.length];
            DTensor glogp;
            if (probabilities) {
                // the loss's gradient at each position: g itself, or g over the positions for a mean
                DTensor scale = reduction == NONE ? alongClasses(g[0], classDim)
                    : reduction == MEAN ? g[0].div((double) (numel(x) / Math.max(classes, 1))) : g[0];
                DTensor weighted = weight == null ? scale : scale.mul(weight);
                DTensor target = smoothing > 0 ? in[1].mul(1 - smoothing).add(smoothing / classes) : in[1];
                glogp = target.mul(weighted).neg();
                if (n[1]) {
                    result[1] = logp.mul(weighted).mul(smoothing - 1);
                }
            } else {
                Nll nll = nll(g[0], logp, in[1], hasWeight ? in[2] : null, reduction, ignore);
                glogp = nll.grad();
                if (smoothing > 0) {
                    DTensor kept = alongClasses(in[1].ne(ignore).to(x.dtype()), classDim);
                    DTensor scale = reduction == NONE ? alongClasses(g[0], classDim)
                        : reduction == MEAN ? g[0].div(nll.totalWeight()) : g[0];
                    DTensor smooth = kept.mul(scale);
                    smooth = weight == null ? smooth : smooth.mul(weight);
                    glogp = glogp.mul(1 - smoothing).sub(smooth.mul(smoothing / classes));
                }
            }
            result[0] = aten("_log_softmax_backward_data", "T,T,i,d", v(null, null, (long) classDim, x.dtype()), glogp, logp);
            return result;
        };
    }

    /** The derivative of {@code nll_loss} and {@code nll_loss_nd}: their log-probabilities'. */
    static Derivative nllLoss(AtenCall call, List<String> names) {
        long reduction = (Long) call.constant("reduction");
        long ignore = (Long) call.constant("ignore_index");
        boolean hasWeight = names.contains("weight");
        return (in, out, g, n) -> {
            DTensor[] result = new DTensor[in.length];
            result[0] = nll(g[0], in[0], in[1], hasWeight ? in[2] : null, reduction, ignore).grad();
            return result;
        };
    }

    /** The gradient of {@code nll_loss} with respect to its log-probabilities, and the total weight of its kept targets. */
    private record Nll(DTensor grad, DTensor totalWeight) {
    }

    private static Nll nll(DTensor g, DTensor logp, DTensor target, DTensor weight, long reduction, long ignore) {
        int nd = logp.ndim();
        if (nd <= 2) {
            return nll2d(g, logp, target, weight, reduction, ignore);
        }
        // (N, C, d1, ...) as (N * d1 * ..., C): the classes last, the positions flattened in their order
        int[] classesLast = new int[nd];
        int[] back = new int[nd];
        for (int d = 0; d < nd; d++) {
            classesLast[d] = d == 0 ? 0 : d == nd - 1 ? 1 : d + 1;
        }
        for (int d = 0; d < nd; d++) {
            back[classesLast[d]] = d;
        }
        DTensor moved = logp.permute(classesLast);
        long classes = logp.size(1);
        long positions = numel(logp) / Math.max(classes, 1);
        Nll flat = nll2d(reduction == NONE ? g.reshape(positions) : g, moved.reshape(positions, classes), target.reshape(positions), weight,
            reduction, ignore);
        return new Nll(flat.grad().reshape(moved.shape()).permute(back), flat.totalWeight());
    }

    private static Nll nll2d(DTensor g, DTensor logp, DTensor target, DTensor weight, long reduction, long ignore) {
        String w = weight == null ? "n" : "T";
        List<DTensor> forward = Grads.all("nll_loss_forward", "T,T," + w + ",i,i", v(null, null, null, reduction, ignore),
            present(logp, target, weight));
        DTensor totalWeight = forward.get(1);
        DTensor grad = aten("nll_loss_backward", "T,T,T," + w + ",i,i,T", v(null, null, null, null, reduction, ignore, null),
            present(g, logp, target, weight, totalWeight));
        return new Nll(grad, totalWeight);
    }

    /** {@code t} (the shape of the logits without their class dimension) with a dimension of 1 for the classes. */
    private static DTensor alongClasses(DTensor t, int classDim) {
        long[] shape = t.shape();
        long[] with = new long[shape.length + 1];
        for (int d = 0, s = 0; d < with.length; d++) {
            with[d] = d == classDim ? 1 : shape[s++];
        }
        return t.reshape(with);
    }

    /** A weight over the classes, shaped to broadcast against logits of {@code ndim} dimensions. */
    private static DTensor alongClasses(DTensor weight, int ndim, int classDim) {
        long[] shape = new long[ndim];
        Arrays.fill(shape, 1);
        shape[classDim] = weight.size(0);
        return ndim == 1 ? weight : weight.reshape(shape);
    }

    private static long numel(DTensor t) {
        long n = 1;
        for (long s : t.shape()) {
            n *= s;
        }
        return n;
    }

    private static boolean floating(DTensor t) {
        return switch (t.dtype()) {
            case Float, Double, Half, BFloat16 -> true;
            default -> false;
        };
    }

    private static DTensor[] present(DTensor... tensors) {
        return Arrays.stream(tensors).filter(t -> t != null).toArray(DTensor[]::new);
    }
}
