package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.ops.aten.ArgKind;
import org.dtorch.ops.aten.AtenCall;

/**
 * Any ATen operator on distributed tensors: each device runs the call ({@link AtenCall}) on its local shards through
 * libtorch's dispatcher, with no communication (except where the strategy's own kernel exchanges halo rows: a
 * height-sharded convolution, {@link HaloConvolution}). The output shapes and dtypes are the operator's own, inferred on meta
 * tensors ({@link MetaInference}); the placements come from the operator's {@link ShardingStrategy}, which also says
 * which input placements this works for. The inputs must already have them: {@link org.dtorch.api.DTorch#aten} moves
 * them there first, and {@link #inferOutputs} refuses others, listing what the strategy accepts.
 *
 * <p>In per-device-process mode the call crosses to the workers by name ({@link AtenCallCodec}, tag {@code ops.aten});
 * each worker finds the overload in its own dispatcher and takes the strategy from the {@link StrategyTable} again, as
 * the public constructor does.
 *
 * <p>Immutable but for its last decision; one kernel serves every device. Thread-safe.
 */
public final class AtenSpec implements OpSpec, PlacementChoice {
    private final AtenCall call;
    private final ShardingStrategy strategy;
    private final DeviceKernel kernel;
    /** The implicit moves' fit and the inference both ask for the decision; the inference then for the outputs. */
    private final LastResult<Known> lastKnown = new LastResult<>();

    /** The call with its strategy from the {@link StrategyTable}. */
    public AtenSpec(AtenCall call) {
        this(call, StrategyTable.of(call));
    }

    AtenSpec(AtenCall call, ShardingStrategy strategy) {
        this.call = Objects.requireNonNull(call, "call");
        this.strategy = Objects.requireNonNull(strategy, "strategy");
        this.kernel = new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                return call.call(inputs);
            }
        };
    }

    @Override
    public String name() {
        return call.overload().name();
    }

    /** The call. */
    public AtenCall call() {
        return call;
    }

    /** The strategy. */
    public ShardingStrategy strategy() {
        return strategy;
    }

    /**
     * The placements the strategy needs of {@code inputs} and gives the outputs, after checking what can be checked
     * without them: the number of inputs, one mesh, tensor returns.
     */
    public ShardingStrategy.Decision decide(List<TensorMeta> inputs) {
        return known(inputs).decision();
    }

    /** {@link #decide}'s answer for {@code inputs}, kept with the outputs' metadata once inferred. */
    private Known known(List<TensorMeta> inputs) {
        // The checks below depend on the call and the inputs' metadata alone, as the key does: a decision found was
        // made for inputs that passed them, so a repeated call skips them.
        DecisionKey key = new DecisionKey(call, inputs);
        Known known = KNOWN.get(key);
        if (known != null) {
            return known;
        }
        Rules.arity(call.qualifiedName(), inputs, call.inputCount());
        if (inputs.isEmpty()) {
            throw new IllegalArgumentException(call.qualifiedName() + " has no tensor input, so it has no mesh to run on");
        }
        Rules.sameMesh(call.qualifiedName(), inputs);
        List<String> types = call.overload().returnTypes();
        long lists = types.stream().filter(ArgKind.TENSOR_LIST::equals).count();
        if (types.isEmpty() || lists > 1 || !types.stream().allMatch(t -> t.equals(ArgKind.TENSOR) || t.equals(ArgKind.TENSOR_LIST))) {
            throw new UnsupportedOperationException(call.qualifiedName() + " does not return only tensors and at most one tensor list ("
                + call.overload().signature() + "); it is not supported on distributed tensors");
        }
        // A tensor list's length depends on the shapes (split, chunk, unbind): the call on meta tensors counts it.
        int returns = lists > 0 ? MetaInference.infer(call, inputs, strategy).size() : types.size();
        known = new Known(strategy.decide(call, inputs, returns));
        if (KNOWN.size() >= KNOWN_KEPT) {
            KNOWN.clear();
        }
        KNOWN.put(key, known);
        return known;
    }

    /** A call and its inputs' shapes, dtypes and shardings: all a strategy's decision and the outputs depend on. */
    private record DecisionKey(AtenCall call, List<TensorMeta> inputs) {
    }

    /**
     * A decision and, once inferred, the outputs' metadata: both are pure functions of the {@link DecisionKey}.
     * Thread-safe: the outputs are published once through a volatile field; two threads that race infer equal lists.
     */
    private static final class Known {
        private final ShardingStrategy.Decision decision;
        private volatile List<TensorMeta> outputs;

        Known(ShardingStrategy.Decision decision) {
            this.decision = decision;
        }

        ShardingStrategy.Decision decision() {
            return decision;
        }
    }

    /**
     * Decisions already made, and the outputs they gave: an operator issued again on inputs of the same metadata (every
     * step of a loop) takes its placements and its outputs' metadata from here instead of working them out again.
     * Cleared when full.
     */
    private static final Map<DecisionKey, Known> KNOWN = new ConcurrentHashMap<>();
    private static final int KNOWN_KEPT = 4096;

    /** {@link #decide}: the strategy's cheapest placements. */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        return lastKnown.of(inputs, this::known).decision();
    }

    /** True for operators in no family, which run on replicated inputs. */
    @Override
    public boolean isFallback() {
        return strategy == ReplicateStrategy.INSTANCE;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Known known = lastKnown.of(inputs, this::known);
        List<TensorMeta> outputs = known.outputs;
        if (outputs == null) {
            outputs = List.copyOf(infer(inputs, known.decision()));
            known.outputs = outputs;
        }
        return outputs;
    }

    private List<TensorMeta> infer(List<TensorMeta> inputs, ShardingStrategy.Decision decision) {
        DeviceMesh mesh = inputs.getFirst().sharding().mesh();
        for (int i = 0; i < inputs.size(); i++) {
            if (!inputs.get(i).placements().equals(decision.inputs().get(i))) {
                throw new ShardingException(call.qualifiedName(), inputs, "input " + i + " has placements " + inputs.get(i).placements()
                    + " where the " + strategy.family() + " strategy runs with " + decision.inputs().get(i)
                    + " (redistribute first, or call it through DTorch.aten, which does)", strategy.legal());
            }
        }
        List<MetaInference.Out> metas = MetaInference.infer(call, inputs, strategy);
        List<TensorMeta> out = new ArrayList<>(metas.size());
        for (int r = 0; r < metas.size(); r++) {
            MetaInference.Out o = metas.get(r);
            TensorMeta meta = new TensorMeta(o.shape(), o.dtype(), Rules.sharding(mesh, decision.outputs().get(r)));
            ShardLayout.of(meta.shape(), meta.sharding());
            out.add(meta);
        }
        return out;
    }

    /**
     * The strategy's kernel for the device where it has one, else the one kernel: the call on the device's local inputs.
     * Where every output of a local kernel is empty on the device (its shards of a dimension shorter than the devices), it
     * makes those empty outputs without calling the operator: there is nothing to compute, and some of libtorch's
     * kernels fail on inputs with no element (its CPU flash attention divides by the batch size).
     */
    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        DeviceKernel own = strategy.kernel(call, op, deviceId);
        DeviceKernel run = own != null ? own : kernel;
        // A kernel of the strategy's own that may communicate runs even where its outputs are empty (its peers wait for
        // it); the one kernel only computes, and libtorch refuses some empty inputs (a weight with no output channel).
        if ((own != null && strategy.communicates(call)) || op.outputs().isEmpty()) {
            return run;
        }
        List<Operand> operands = op.outputs();
        for (int i = 0, n = operands.size(); i < n; i++) {
            if (operands.get(i).meta().layout().localNumel(deviceId) != 0) {
                return run;
            }
        }
        List<TensorMeta> outputs = operands.stream().map(Operand::meta).toList();
        List<long[]> shapes = outputs.stream().map(o -> o.layout().localShape(deviceId)).toList();
        return (ctx, inputs) -> {
            List<Tensor> empty = new ArrayList<>(shapes.size());
            for (int r = 0; r < shapes.size(); r++) {
                try (TensorOptions options = inputs.getFirst().options().dtype(new ScalarTypeOptional(outputs.get(r).dtype()))) {
                    empty.add(torch.empty(shapes.get(r), options, new MemoryFormatOptional()));
                }
            }
            return empty;
        };
    }

    /** True where the strategy's kernels may communicate (a convolution's halo exchange). */
    @Override
    public boolean communicates() {
        return strategy.communicates(call);
    }

    @Override
    public String toString() {
        return "AtenSpec(" + call + ", " + strategy.family() + ")";
    }
}
