package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.OptionSearch.Option;
import org.dtorch.ops.aten.AtenCall;

/**
 * Operators that normalize the first input along some of its dimensions and leave the others independent: softmax and
 * log-softmax (along {@code dim}), layer norm and RMS norm (along the last {@code len(normalized_shape)} dimensions),
 * group norm (along everything but the batch dimension 0). Per mesh dimension:
 * <ul>
 *   <li>{@code S(d)} of the first input on an independent dimension stays, and the output (of the input's shape) is
 *       {@code S(d)};</li>
 *   <li>{@code S(d)} on a normalized dimension is gathered to {@code R} first, as is a partial input (none of these
 *       operators is linear);</li>
 *   <li>the other tensor inputs (weight and bias, shaped like the normalized dimensions) are {@code R}.</li>
 * </ul>
 * {@code _fused_rms_norm} also gives {@code rstd}, of the input's rank with the normalized dimensions of size one: sharded
 * as the output is. ({@code native_layer_norm}, whose mean and rstd have other shapes and no meta kernel in libtorch's C++ build, is not
 * in the family.)
 *
 * <p>Stateless. Thread-safe.
 */
final class NormalizationStrategy implements ShardingStrategy {
    static final NormalizationStrategy INSTANCE = new NormalizationStrategy();

    /** Normalized along {@code dim}. */
    private static final Set<String> ALONG_DIM = Set.of("softmax", "_softmax", "log_softmax", "_log_softmax",
        // their derivatives (gradient and output, of one shape) normalize along the same dim
        "_softmax_backward_data", "_log_softmax_backward_data");
    /** Normalized along the trailing {@code normalized_shape}. */
    private static final Set<String> TRAILING = Set.of("layer_norm", "rms_norm", "_fused_rms_norm");
    /** Normalized along everything but dimension 0. */
    private static final Set<String> PER_SAMPLE = Set.of("group_norm");

    private NormalizationStrategy() {
    }

    /** True when {@code name} is an operator of this family. */
    static boolean covers(String name) {
        return ALONG_DIM.contains(name) || TRAILING.contains(name) || PER_SAMPLE.contains(name);
    }

    /** The operator names of this family (for tests that walk the table). */
    static Set<String> names() {
        Set<String> all = new TreeSet<>(ALONG_DIM);
        all.addAll(TRAILING);
        all.addAll(PER_SAMPLE);
        return all;
    }

    @Override
    public String family() {
        return "normalization";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; or S(d) of the input on a dimension it does not normalize (softmax and its derivatives: any but dim; "
            + "layer_norm, rms_norm, _fused_rms_norm: any before normalized_shape; group_norm: the batch dimension 0), with every other "
            + "tensor input (weight, bias) R";
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        TensorMeta x = inputs.getFirst();
        boolean[] normalized = normalized(call, x.ndim());
        List<List<Option>> options = new ArrayList<>();
        for (int m = 0; m < x.placements().size(); m++) {
            options.add(independentShards(inputs, normalized, m));
        }
        return OptionSearch.cheapest(call.qualifiedName(), inputs, options, outputs);
    }

    /**
     * The ways to run on mesh dimension {@code m} an operator that treats the dimensions of its first input that
     * {@code whole} marks together and the others independently: every input {@code R}, or the first input sharded on
     * an independent dimension (not one shorter than the split, unless it is sharded so already) with the inputs of its
     * shape sharded alike (a derivative's gradient and output) and the others {@code R}, giving that shard.
     */
    static List<Option> independentShards(List<TensorMeta> inputs, boolean[] whole, int m) {
        TensorMeta x = inputs.getFirst();
        List<Option> out = new ArrayList<>();
        out.add(new Option(Collections.nCopies(inputs.size(), Placement.replicate()), Placement.replicate()));
        int ways = x.sharding().mesh().size(m);
        for (int d = 0; d < x.ndim(); d++) {
            if (!whole[d] && (x.size(d) >= ways || x.placement(m).isShard(d))) {
                List<Placement> ps = new ArrayList<>(inputs.size());
                for (TensorMeta input : inputs) {
                    ps.add(input == x || Arrays.equals(input.shape(), x.shape()) ? Placement.shard(d) : Placement.replicate());
                }
                out.add(new Option(ps, Placement.shard(d)));
            }
        }
        return out;
    }

    /** The input's shape. */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        return inputs.getFirst().shape();
    }

    /** The input with its independent dimensions cut to 1 (the normalized ones checked against weight and bias); the others whole. */
    @Override
    public long[][] probeShapes(AtenCall call, List<TensorMeta> inputs) {
        long[][] out = shapes(inputs);
        long[] x = out[0].clone();
        boolean[] normalized = normalized(call, x.length);
        for (long[] shape : out) {
            if (Arrays.equals(shape, x)) {
                for (int d = 0; d < normalized.length; d++) {
                    shape[d] = normalized[d] ? shape[d] : 1;
                }
            }
        }
        return out;
    }

    /** Which of {@code ndim} dimensions {@code call} normalizes together. */
    private static boolean[] normalized(AtenCall call, int ndim) {
        String name = call.overload().name();
        boolean[] out = new boolean[ndim];
        if (ALONG_DIM.contains(name)) {
            if (!(call.constant("dim") instanceof Number dim)) {
                throw new UnsupportedOperationException(call.qualifiedName() + ": named dimensions are not supported on distributed tensors");
            }
            int d = Rules.normalizeDim(name, Math.toIntExact(dim.longValue()), Math.max(ndim, 1));
            if (ndim > 0) {
                out[d] = true;
            }
        } else if (TRAILING.contains(name)) {
            int n = ((long[]) call.constant("normalized_shape")).length;
            for (int d = Math.max(0, ndim - n); d < ndim; d++) {
                out[d] = true;
            }
        } else if (ndim > 1) {
            Arrays.fill(out, 1, ndim, true);
        }
        return out;
    }

    /** The inputs' whole shapes (copies), for probes that keep some sizes. */
    static long[][] shapes(List<TensorMeta> inputs) {
        long[][] out = new long[inputs.size()][];
        for (int i = 0; i < out.length; i++) {
            out[i] = inputs.get(i).shape();
        }
        return out;
    }

    /**
     * Per mesh dimension of {@code t}: its shard where it is on a dimension {@code whole} leaves independent, else R (a
     * sharded whole dimension is gathered, a partial value reduced).
     */
    static List<Placement> keepIndependentShards(TensorMeta t, boolean[] whole) {
        List<Placement> out = new ArrayList<>();
        for (Placement p : t.placements()) {
            int d = Rules.shardDim(p);
            out.add(d >= 0 && !whole[d] ? p : Placement.replicate());
        }
        return out;
    }
}
