package org.dtorch.api;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.AtenSpec;
import org.dtorch.ops.CopySpec;
import org.dtorch.ops.InPlaceSpec;
import org.dtorch.ops.Region;
import org.dtorch.ops.RegionWriteSpec;
import org.dtorch.ops.aten.AtenCall;

/**
 * In-place writes into distributed tensors: ATen's in-place overloads ({@code add_}), {@code t[region] = value} and every
 * other operator that writes into its first input ({@code copy_}, the write-back of a view). A written tensor keeps its
 * placements; the write is counted ({@link Aliasing#written}) so that views of the tensor follow it, and a tensor a view
 * cannot write back into is refused before anything runs.
 *
 * <p>Not thread-safe: the client thread that owns the runtime.
 */
final class Writes {
    private final DTorch runtime;
    private final ImplicitRedistribution implicit;
    private final Aliasing aliasing;

    Writes(DTorch runtime, ImplicitRedistribution implicit, Aliasing aliasing) {
        this.runtime = runtime;
        this.implicit = implicit;
        this.aliasing = aliasing;
    }

    /**
     * Runs the in-place overload {@code call} into {@code inputs[0]} and returns that tensor. Where no shard can take its
     * own part of the result where it is (a non-linear operator on partial sums, a dimension the operator mixes), the
     * result is computed out of place and copied back, moved to the tensor's placements; in strict mode the
     * {@link InPlaceSpec} refuses such inputs instead.
     */
    List<DTensor> inPlace(AtenCall call, DTensor... inputs) {
        Objects.requireNonNull(inputs, () -> call.qualifiedName() + ": inputs is null");
        if (inputs.length == 0 || inputs[0] == null) {
            throw new NullPointerException(call.qualifiedName() + ": input 0 is null");
        }
        InPlaceSpec spec = new InPlaceSpec(call);
        DTensor[] others = Arrays.copyOfRange(inputs, 1, inputs.length);
        List<TensorMeta> metas = new ArrayList<>(inputs.length);
        for (DTensor t : inputs) {
            metas.add(Objects.requireNonNull(t, () -> call.qualifiedName() + ": an input is null").meta());
        }
        if (!spec.keepsPlacements(metas) && implicit.enabled()) {
            spec.check(metas);
            List<DTensor> result = runtime.applyMulti(new AtenSpec(spec.functional()), inputs);
            try {
                write(CopySpec.INSTANCE, inputs[0], result.getFirst());
            } finally {
                result.forEach(DTensor::close);
            }
        } else {
            write(spec, inputs[0], others);
        }
        return List.of(inputs[0]);
    }

    /**
     * Adds {@code spec}, an operator that writes into {@code target} (its first input) in place and has no output, after
     * moving the other inputs where it needs them; then counts the write, so that views of {@code target} follow it.
     */
    void write(OpSpec spec, DTensor target, DTensor... others) {
        Objects.requireNonNull(target, () -> spec.name() + ": the tensor written is null");
        target.ensureOpen();
        aliasing.checkWritable(target, spec.name());
        DTensor[] inputs = new DTensor[others.length + 1];
        inputs[0] = target;
        System.arraycopy(others, 0, inputs, 1, others.length);
        runtime.applyNoOutput(spec, inputs);
        aliasing.written(target);
    }

    void setRegion(DTensor t, Region region, DTensor value) {
        write(RegionWriteSpec.ofTensor(Objects.requireNonNull(region, "setitem: region is null")), t,
            Objects.requireNonNull(value, "setitem: value is null"));
    }

    void setRegion(DTensor t, Region region, double value) {
        write(RegionWriteSpec.ofNumber(Objects.requireNonNull(region, "setitem: region is null"), value), t);
    }

    void setRegion(DTensor t, Region region, long value) {
        write(RegionWriteSpec.ofNumber(Objects.requireNonNull(region, "setitem: region is null"), value), t);
    }

    void setRegion(DTensor t, Region region, boolean value) {
        write(RegionWriteSpec.ofNumber(Objects.requireNonNull(region, "setitem: region is null"), value), t);
    }
}
