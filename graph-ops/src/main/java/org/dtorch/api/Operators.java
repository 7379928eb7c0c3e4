package org.dtorch.api;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operand;
import org.dtorch.ops.ProductCalls;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;

/**
 * Adds operators to the graph for {@link DTorch}: the inputs are moved where the operator takes them
 * ({@link ImplicitRedistribution}), checked to be this runtime's and read fresh ({@link Aliasing#fresh}), and the
 * outputs get their handles and, for views, their memory. The operators {@link DTorch} names itself ({@code linear},
 * {@code cat}, {@code where}) are ATen calls built here and run through {@link DTorch#aten}.
 *
 * <p>Not thread-safe: the client thread that owns the runtime.
 */
final class Operators {
    private final DTorch runtime;
    private final ImplicitRedistribution implicit;
    private final Aliasing aliasing;

    Operators(DTorch runtime, ImplicitRedistribution implicit, Aliasing aliasing) {
        this.runtime = runtime;
        this.implicit = implicit;
        this.aliasing = aliasing;
    }

    /** Adds {@code spec} on {@code inputs} fitted to it and returns handles of all its outputs. */
    List<DTensor> applyMulti(OpSpec spec, DTensor... inputs) {
        try (ImplicitRedistribution.Fitted fitted = implicit.fit(Objects.requireNonNull(spec, "apply: spec is null"), inputs)) {
            List<DTensor> outputs = new ArrayList<>();
            for (Operand o : runtime.graph().add(spec, operands(spec, fitted.inputs()))) {
                outputs.add(new DTensor(runtime, o));
            }
            aliasing.outputsOf(spec, inputs, fitted.inputs(), outputs);
            return outputs;
        }
    }

    /** Adds {@code spec}, an operator without outputs, on {@code inputs} fitted to it. */
    void applyNoOutput(OpSpec spec, DTensor... inputs) {
        try (ImplicitRedistribution.Fitted fitted = implicit.fit(Objects.requireNonNull(spec, "apply: spec is null"), inputs)) {
            List<Operand> outputs = runtime.graph().add(spec, operands(spec, fitted.inputs()));
            if (!outputs.isEmpty()) {
                throw new IllegalStateException(spec.name() + " unexpectedly has outputs");
            }
        }
    }

    private List<Operand> operands(OpSpec spec, DTensor[] inputs) {
        Objects.requireNonNull(spec, "apply: spec is null");
        Objects.requireNonNull(inputs, () -> spec.name() + ": inputs is null");
        List<Operand> operands = new ArrayList<>(inputs.length);
        for (int i = 0; i < inputs.length; i++) {
            DTensor t = Objects.requireNonNull(inputs[i], spec.name() + ": input " + i + " is null");
            if (t.runtime() != runtime) {
                throw new IllegalArgumentException("tensor " + t + " belongs to another runtime");
            }
            aliasing.fresh(t);
            operands.add(DTensor.operandOf(t));
        }
        return operands;
    }

    // ---- operators taking several tensors, as ATen calls -------------------------------------------------------

    DTensor linear(DTensor x, DTensor weight) {
        Objects.requireNonNull(x, "linear: x is null");
        Objects.requireNonNull(weight, "linear: weight is null");
        return runtime.aten(ProductCalls.LINEAR, x, weight).getFirst();
    }

    DTensor linear(DTensor x, DTensor weight, DTensor bias) {
        Objects.requireNonNull(x, "linear: x is null");
        Objects.requireNonNull(weight, "linear: weight is null");
        Objects.requireNonNull(bias, "linear: bias is null");
        return runtime.aten(ProductCalls.LINEAR_BIAS, x, weight, bias).getFirst();
    }

    DTensor cat(List<DTensor> tensors, int dim) {
        Objects.requireNonNull(tensors, "cat: tensors is null");
        DTensor[] inputs = new DTensor[tensors.size()];
        for (int i = 0; i < inputs.length; i++) {
            inputs[i] = Objects.requireNonNull(tensors.get(i), "cat: tensors[" + i + "] is null");
        }
        AtenCall call = new AtenCall(AtenOps.overload("cat", ""), List.of(new AtenCall.InputList(0, inputs.length),
            new AtenCall.Constant((long) dim)));
        return runtime.aten(call, inputs).getFirst();
    }

    /** {@code where} with two scalar branches: a tensor of the condition's shape and placements. */
    DTensor where(DTensor condition, String key, Object a, Object b) {
        Objects.requireNonNull(condition, "where: condition is null");
        return runtime.aten(AtenCall.of("where", key, null, a, b), condition).getFirst();
    }

    /** {@code where} with one scalar branch ({@code scalar}, at the key's {@code f} or {@code i}) or none (null). */
    DTensor where(String key, Object scalar, DTensor... tensors) {
        for (int i = 0; i < tensors.length; i++) {
            Objects.requireNonNull(tensors[i], "where: " + (i == 0 ? "condition" : "tensor branch " + i) + " is null");
        }
        boolean scalarLast = key.charAt(2) == 'T'; // "T,T,f": the condition and a tensor a, then the number b
        Object[] values = scalar == null ? new Object[3] : scalarLast ? new Object[] {null, null, scalar} : new Object[] {null, scalar, null};
        return runtime.aten(AtenCall.of("where", key, values), tensors).getFirst();
    }
}
