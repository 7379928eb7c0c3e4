package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;
import org.dtorch.ops.aten.Overload;

/**
 * An ATen operator that writes its result into its first tensor input, in place ({@code add_}, {@code mul_},
 * {@code masked_fill_}, {@code clamp_}, {@code zero_}, ...): every device runs the in-place overload on its own shard of
 * that input, which keeps its placements, so the write touches only the bytes the device holds. The other inputs are
 * moved to what the operator's family needs for that ({@link ShardingStrategy#decidePinned}, asked of the family of the
 * functional overload, {@code add} for {@code add_}); where the family cannot keep the written tensor's placements (a
 * non-linear operator on partial values, a sharded dimension the operator mixes) the operator is refused, naming them,
 * as PyTorch DTensor refuses it: redistribute the tensor first, or use the functional form.
 *
 * <p>There is no output: the written tensor's handle stays the same tensor. Libtorch checks the call on meta tensors
 * first (shapes, and that the result's dtype can be written into the tensor's), so a bad call fails before anything
 * runs.
 *
 * <p>Immutable; one kernel serves every device. Thread-safe.
 */
public final class InPlaceSpec implements OpSpec, PlacementChoice {
    private final AtenCall call;
    private final AtenCall functional;
    private final ShardingStrategy strategy;

    /**
     * The in-place call {@code call} (an overload that writes its first tensor argument and nothing else).
     *
     * @throws UnsupportedOperationException when the overload writes another argument, or has no functional twin whose
     *                                       sharding rule could place it
     */
    public InPlaceSpec(AtenCall call) {
        this.call = Objects.requireNonNull(call, "call");
        Overload o = call.overload();
        List<String> names = call.inputNames();
        if (!isInPlace(o) || names.isEmpty() || !o.mutatedParams().equals(List.of(names.getFirst()))) {
            throw new UnsupportedOperationException(call.qualifiedName() + " writes " + o.mutatedParams() + ", not its first tensor "
                + "argument alone; it is not supported on distributed tensors");
        }
        this.functional = functionalTwin(call);
        this.strategy = StrategyTable.of(functional);
    }

    /** True when {@code overload} is an in-place one: named {@code <op>_} and writing some of its arguments. */
    public static boolean isInPlace(Overload overload) {
        return overload.name().endsWith("_") && !overload.mutatedParams().isEmpty();
    }

    /** The same arguments on the overload of the same parameters without the trailing underscore. */
    private static AtenCall functionalTwin(AtenCall call) {
        Overload o = call.overload();
        String base = o.name().substring(0, o.name().length() - 1);
        List<Overload> candidates = AtenOps.overloads(base);
        if (candidates != null) {
            for (Overload c : candidates) {
                if (c.mutatedParams().isEmpty() && sameParams(c, o)) {
                    return new AtenCall(c, call.args());
                }
            }
        }
        throw new UnsupportedOperationException(call.qualifiedName() + " has no functional twin aten::" + base + " of the same "
            + "parameters, so its sharding cannot be inferred; it is not supported on distributed tensors");
    }

    private static boolean sameParams(Overload a, Overload b) {
        List<Overload.Param> x = a.params();
        List<Overload.Param> y = b.params();
        if (x.size() != y.size()) {
            return false;
        }
        for (int i = 0; i < x.size(); i++) {
            if (!x.get(i).name().equals(y.get(i).name()) || !x.get(i).type().equals(y.get(i).type())) {
                return false;
            }
        }
        return true;
    }

    @Override
    public String name() {
        return call.overload().name();
    }

    /** The in-place call. */
    public AtenCall call() {
        return call;
    }

    /** The same arguments on the functional overload ({@code add} for {@code add_}). */
    public AtenCall functional() {
        return functional;
    }

    /**
     * True when every device can write into its own shard of input 0 as it is placed: the family keeps its placements
     * for the call, with the other inputs moved. Where it cannot, the caller computes the functional form and copies the
     * result back ({@link org.dtorch.api.DTorch#aten}).
     */
    public boolean keepsPlacements(List<TensorMeta> inputs) {
        return pinned(inputs).isPresent();
    }

    /** The family's placements keeping input 0, remembered per call and input metadata (a loop asks the same again). */
    private Optional<ShardingStrategy.Decision> pinned(List<TensorMeta> inputs) {
        Rules.arity(call.qualifiedName(), inputs, call.inputCount());
        Rules.sameMesh(call.qualifiedName(), inputs);
        Key key = new Key(call, List.copyOf(inputs));
        Optional<ShardingStrategy.Decision> known = DECISIONS.get(key);
        if (known == null) {
            known = Optional.ofNullable(strategy.decidePinned(functional, inputs, 0));
            if (DECISIONS.size() >= DECISIONS_KEPT) {
                DECISIONS.clear();
            }
            DECISIONS.put(key, known);
        }
        return known;
    }

    private record Key(AtenCall call, List<TensorMeta> inputs) {
    }

    private static final Map<Key, Optional<ShardingStrategy.Decision>> DECISIONS = new ConcurrentHashMap<>();
    private static final int DECISIONS_KEPT = 4096;

    /**
     * Has libtorch check the in-place call on meta tensors of the inputs' shapes and dtypes (the result must have input
     * 0's shape, and its dtype must be writable into input 0's).
     *
     * @throws IllegalArgumentException with libtorch's message
     */
    public void check(List<TensorMeta> inputs) {
        MetaInference.infer(call, inputs, strategy);
    }

    /** The written tensor's placements kept, the other inputs where the family needs them for that. */
    @Override
    public ShardingStrategy.Decision choose(List<TensorMeta> inputs) {
        ShardingStrategy.Decision d = pinned(inputs).orElse(null);
        if (d == null) {
            throw new ShardingException(call.qualifiedName(), inputs, "the " + strategy.family() + " rule cannot write the result into input 0 "
                + "with its placements " + inputs.getFirst().placements() + " (an in-place operator keeps them); redistribute it first, or "
                + "use the functional " + functional.overload().name(), strategy.legal());
        }
        return d;
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        ShardingStrategy.Decision d = choose(inputs);
        for (int i = 1; i < inputs.size(); i++) {
            if (!inputs.get(i).placements().equals(d.inputs().get(i))) {
                throw new ShardingException(call.qualifiedName(), inputs, "input " + i + " has placements " + inputs.get(i).placements()
                    + " where writing into input 0 needs " + d.inputs().get(i), strategy.legal());
            }
        }
        MetaInference.infer(call, inputs, strategy);
        return List.of();
    }

    @Override
    public List<Integer> writtenInputs(Operator op) {
        return call.writtenInputs();
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                for (Tensor result : call.call(new ArrayList<>(inputs))) {
                    result.close(); // the written input itself
                }
                return List.of();
            }
        };
    }

    @Override
    public String toString() {
        return "InPlaceSpec(" + call + ", " + strategy.family() + ")";
    }
}
