package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * {@code batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)} on an
 * input of shape {@code (N, C, *)}, whose per-channel tensors (weight, bias, running statistics; any may be None) have
 * shape {@code (C)}. Every output element depends on its own channel's statistics, so per mesh dimension:
 * <ul>
 *   <li>with running statistics ({@code training=False} and both given) the statistics are constants: any shard of
 *       the input stays, and a shard of the channel dimension 1 takes the per-channel tensors sharded alike
 *       ({@code S(0)}, sliced locally from {@code R});</li>
 *   <li>with batch statistics ({@code training=True}, or no running statistics) each channel's statistics cover the
 *       batch and spatial dimensions: only a shard of the channel dimension stays (per-channel tensors {@code S(0)}),
 *       other shards are gathered;</li>
 *   <li>partial inputs are reduced to {@code R} (the operator is affine, not linear); per-channel tensors are
 *       {@code R} where the input is not channel-sharded.</li>
 * </ul>
 * Training with running statistics updates them in place, which distributed tensors do not do: refused.
 *
 * <p>Stateless. Thread-safe.
 */
final class BatchNormStrategy implements ShardingStrategy {
    static final BatchNormStrategy INSTANCE = new BatchNormStrategy();

    private BatchNormStrategy() {
    }

    @Override
    public String family() {
        return "batch_norm";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; S(d) of the input with R per-channel tensors (d != 1, training=False with running "
            + "statistics only); S(1) of the input with S(0) per-channel tensors";
    }

    /** The input's shape. */
    @Override
    public long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        return inputs.getFirst().shape();
    }

    /** Two samples of one element per channel (batch statistics need more than one value per channel); the rest whole. */
    @Override
    public long[][] probeShapes(AtenCall call, List<TensorMeta> inputs) {
        long[][] out = NormalizationStrategy.shapes(inputs);
        for (int d = 0; d < out[0].length; d++) {
            out[0][d] = d == 0 ? 2 : d == 1 ? out[0][d] : 1;
        }
        return out;
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        boolean training = Boolean.TRUE.equals(call.constant("training"));
        List<String> names = call.inputNames();
        boolean runningStats = names.contains("running_mean") && names.contains("running_var");
        if (training && (names.contains("running_mean") || names.contains("running_var"))) {
            throw new UnsupportedOperationException(call.qualifiedName() + " with training=True updates running_mean and running_var "
                + "in place, which distributed tensors do not support; pass None for them, or training=False");
        }
        TensorMeta x = inputs.getFirst();
        boolean[] whole = new boolean[x.ndim()];
        if (!runningStats) {
            for (int d = 0; d < whole.length; d++) {
                whole[d] = d != 1;
            }
        }
        List<Placement> kept = NormalizationStrategy.keepIndependentShards(x, whole);
        List<Placement> perChannel = new ArrayList<>();
        for (Placement p : kept) {
            perChannel.add(p.isShard(1) ? Placement.shard(0) : Placement.replicate());
        }
        List<List<Placement>> in = new ArrayList<>();
        in.add(kept);
        for (int i = 1; i < inputs.size(); i++) {
            in.add(perChannel);
        }
        return new Decision(in, Collections.nCopies(outputs, kept));
    }
}
