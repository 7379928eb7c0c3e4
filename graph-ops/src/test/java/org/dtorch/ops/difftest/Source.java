package org.dtorch.ops.difftest;

import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;

/**
 * An input of a program: a tensor of {@code shape} and {@code dtype} whose values come from {@code seed}, distributed on
 * mesh number {@code mesh} with {@code placements} (a partial placement from a replicated copy, so the sum or maximum
 * of the parts is the value). Floating-point values are multiples of 1/4 in [-2, 2]: exact in bfloat16, and sums and
 * products of a few of them are exact in any order, so that rounding differences come only from the operators that
 * need rounding. Integers lie in [-6, 9], or in [0, {@code bound}) where {@code bound} is positive (an index).
 *
 * <p>Immutable. Thread-safe.
 */
public record Source(long[] shape, ScalarType dtype, int mesh, List<Placement> placements, long seed, long bound) implements Step {
    public Source {
        shape = shape.clone();
        placements = List.copyOf(placements);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** This input with other placements (the shrinker replicates inputs). */
    Source with(List<Placement> others) {
        return new Source(shape, dtype, mesh, others, seed, bound);
    }

    @Override
    public int[] reads() {
        return new int[0];
    }

    @Override
    public int outputs() {
        return 1;
    }

    @Override
    public Step withReads(int[] reads) {
        return this;
    }

    /** The input's whole value, a new tensor the caller owns. */
    Tensor values() {
        try (Generator g = torch.make_generator_cpu(seed); GeneratorOptional gen = new GeneratorOptional(g)) {
            switch (dtype) {
                case Bool -> {
                    try (Tensor i = torch.randint(0, 2, shape, gen)) {
                        return i.to(ScalarType.Bool);
                    }
                }
                case Long -> {
                    return bound > 0 ? torch.randint(0, bound, shape, gen) : torch.randint(-6, 10, shape, gen);
                }
                default -> {
                    try (Tensor i = torch.randint(-8, 9, shape, gen); Tensor f = i.to(ScalarType.Float); Scalar q = new Scalar(0.25);
                         Tensor scaled = f.mul(q)) {
                        return scaled.to(dtype);
                    }
                }
            }
        }
    }

    @Override
    public List<DTensor> run(DTorch dt, List<DeviceMesh> meshes, List<DTensor> in) {
        try (Tensor v = values()) {
            return List.of(place(dt, v, meshes.get(mesh), placements));
        }
    }

    /** {@code whole} on {@code mesh} with {@code placements}; partial placements come from a replicated copy. */
    static DTensor place(DTorch dt, Tensor whole, DeviceMesh mesh, List<Placement> placements) {
        Placement[] ps = placements.toArray(Placement[]::new);
        if (placements.stream().noneMatch(Placement::isPartial)) {
            return dt.tensor(whole, mesh, ps);
        }
        Placement[] kept = ps.clone();
        for (int m = 0; m < kept.length; m++) {
            kept[m] = kept[m].isPartial() ? Placement.replicate() : kept[m];
        }
        try (DTensor d = dt.tensor(whole, mesh, kept)) {
            return d.redistribute(ps);
        }
    }

    @Override
    public List<Tensor> reference(List<Tensor> in) {
        return List.of(values());
    }

    /** {@code x} is the name of the values' literal (see {@link PythonRepro}). */
    @Override
    public String python(List<String> in, List<String> out, boolean distributed) {
        String x = "_x" + out.getFirst().substring(1);
        return distributed ? out.getFirst() + " = _place(" + x + ", m" + mesh + ", " + Py.placements(placements) + ")"
            : out.getFirst() + " = " + x + ".clone()";
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Source s && Arrays.equals(shape, s.shape) && dtype == s.dtype && mesh == s.mesh && placements.equals(s.placements)
            && seed == s.seed && bound == s.bound;
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(shape) * 31 + placements.hashCode() + Long.hashCode(seed);
    }

    @Override
    public String toString() {
        return "input " + org.dtorch.core.tensor.TorchTensors.dtypeName(dtype) + Arrays.toString(shape) + " on m" + mesh + " " + placements
            + " (seed " + seed + (bound > 0 ? ", below " + bound : "") + ")";
    }
}
