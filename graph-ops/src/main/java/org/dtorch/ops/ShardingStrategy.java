package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * How one family of ATen operators runs on sharded tensors, in the manner of PyTorch DTensor's op strategies: given a
 * call and its inputs' metadata, the placements each input must have for the operator to run on every device's local
 * shard alone, and the placements its outputs then have. Inputs that do not have them are redistributed first, by
 * the {@link org.dtorch.core.distributed.RedistributionPlanner}'s cheapest plan ({@link org.dtorch.api.DTorch#aten}).
 *
 * <p>Implementations are stateless. Thread-safe.
 */
public interface ShardingStrategy {

    /** The placements the inputs need and the outputs get, one list of placements (one per mesh dimension) each. */
    record Decision(List<List<Placement>> inputs, List<List<Placement>> outputs) {
        public Decision {
            inputs = frozen(inputs);
            outputs = frozen(outputs);
        }

        /** Unmodifiable copies of the lists (a loop: every operator's strategy makes one or two). */
        private static List<List<Placement>> frozen(List<List<Placement>> lists) {
            @SuppressWarnings("unchecked")
            List<Placement>[] out = new List[lists.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = List.copyOf(lists.get(i));
            }
            return List.of(out);
        }
    }

    /** {@code inputs} lists of {@code meshDims} {@code R}s, to be changed where a rule keeps a placement. */
    static List<List<Placement>> replicatedInputs(int inputs, int meshDims) {
        List<List<Placement>> in = new ArrayList<>(inputs);
        for (int i = 0; i < inputs; i++) {
            in.add(new ArrayList<>(Collections.nCopies(meshDims, Placement.replicate())));
        }
        return in;
    }

    /** The family's name: {@code pointwise}, {@code reduction}, {@code concat-split}, {@code convolution}, {@code replicate}, ... */
    String family();

    /**
     * The placements for {@code call} on {@code inputs} (all on one mesh), for {@code outputs} outputs.
     *
     * @throws IllegalArgumentException when the shapes do not fit the operator
     */
    Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs);

    /**
     * The outputs' global shape by the family's own rule (element-wise: the broadcast shape; reductions: the kept
     * dimensions), for operators libtorch has no meta kernel for ({@link MetaInference}); null when the family has none.
     */
    default long[] outputShape(AtenCall call, List<TensorMeta> inputs) {
        return null;
    }

    /**
     * The global shape of each output, for operators libtorch has no meta kernel for whose outputs differ in shape (a
     * derivative giving an input's gradient and a weight's); null when {@link #outputShape} answers for all, or none does.
     */
    default long[][] outputShapes(AtenCall call, List<TensorMeta> inputs) {
        return null;
    }

    /**
     * The outputs' dtype by the family's own rule, where {@link #outputShape} answers and a run on one-element tensors
     * cannot ({@link MetaInference}: an index of value 1 is out of range there); null to run the call on them.
     */
    default ScalarType outputDtype(AtenCall call, List<TensorMeta> inputs) {
        return null;
    }

    /**
     * The input shapes {@link MetaInference} runs {@code call} on, on CPU, to learn the outputs' dtypes (and have
     * libtorch check the call) when it has no meta kernel: by default one element each, with the inputs' numbers of
     * dimensions. Families whose operators check sizes against their constants or against each other (a normalized
     * shape, a channel count) keep those sizes.
     */
    default long[][] probeShapes(AtenCall call, List<TensorMeta> inputs) {
        long[][] out = new long[inputs.size()][];
        for (int i = 0; i < out.length; i++) {
            out[i] = new long[inputs.get(i).ndim()];
            Arrays.fill(out[i], 1);
        }
        return out;
    }

    /**
     * What device {@code deviceId} runs for {@code op} (an {@link AtenSpec} of {@code call}) when the call on its local
     * shards alone is not the answer, as for an embedding whose weight rows are sharded; null (the default) runs the call.
     */
    default DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        return null;
    }

    /**
     * True when a {@link #kernel} of {@code call} may communicate with other devices ({@link AtenSpec#communicates}), as
     * a convolution's halo exchange does; false (the default) when every kernel is local.
     */
    default boolean communicates(AtenCall call) {
        return false;
    }

    /**
     * The placements for {@code call} when input {@code pinned} must keep its placements and the one output gets them too:
     * an in-place operator writes its result into that input. By default {@link #decide}'s answer where it already
     * is so, else null (the family cannot run {@code call} in place on these placements).
     */
    default Decision decidePinned(AtenCall call, List<TensorMeta> inputs, int pinned) {
        Decision d = decide(call, inputs, 1);
        List<Placement> own = inputs.get(pinned).placements();
        return d.inputs().get(pinned).equals(own) && d.outputs().getFirst().equals(own) ? d : null;
    }

    /** The input placements the strategy runs without communication, in words, for error messages. */
    String legal();
}
