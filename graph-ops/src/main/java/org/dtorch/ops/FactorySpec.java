package org.dtorch.ops;

import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;

/**
 * Tensors made from nothing: {@code empty}, {@code zeros}, {@code ones}, {@code full}, {@code arange},
 * {@code rand}, {@code randn}. Each device makes only its own shard, except the random ones: for the same
 * seed to give the same global values whatever the mesh, each device draws the whole tensor from a
 * generator seeded with it and keeps its slice (so a random factory costs the whole tensor on every device;
 * a counter-based generator would avoid that).
 *
 * <p>Sharding rule: {@code S(d)} and {@code R}; partial placements are rejected (a factory has no partial
 * values to split).
 *
 * <p>Thread-safe: immutable.
 */
public final class FactorySpec implements OpSpec {
    /** The factories. */
    public enum Kind { EMPTY, ZEROS, ONES, FULL, ARANGE, RAND, RANDN }

    private final Kind kind;
    private final TensorMeta meta;
    private final double value;
    private final double start;
    private final double step;
    private final long seed;

    private FactorySpec(Kind kind, TensorMeta meta, double value, double start, double step, long seed) {
        this.kind = kind;
        this.meta = Objects.requireNonNull(meta, "meta");
        this.value = value;
        this.start = start;
        this.step = step;
        this.seed = seed;
    }

    /** {@code empty}, {@code zeros} or {@code ones}. */
    public static FactorySpec of(Kind kind, long[] shape, ScalarType dtype, Sharding sharding) {
        return new FactorySpec(kind, meta(kind, shape, dtype, sharding), 0, 0, 0, 0);
    }

    /** {@code full(value)}. */
    public static FactorySpec full(double value, long[] shape, ScalarType dtype, Sharding sharding) {
        return new FactorySpec(Kind.FULL, meta(Kind.FULL, shape, dtype, sharding), value, 0, 0, 0);
    }

    /** {@code arange(start, end, step)}: a 1-D tensor. */
    public static FactorySpec arange(double start, double end, double step, ScalarType dtype, Sharding sharding) {
        if (step == 0 || (end - start) / step < 0) {
            throw new IllegalArgumentException("arange: no values from " + start + " to " + end + " by " + step);
        }
        long n = (long) Math.ceil((end - start) / step);
        return new FactorySpec(Kind.ARANGE, meta(Kind.ARANGE, new long[] {n}, dtype, sharding), 0, start, step, 0);
    }

    /** {@code rand} (uniform in [0, 1)) or {@code randn} (standard normal) from {@code seed}. */
    public static FactorySpec random(Kind kind, long seed, long[] shape, ScalarType dtype, Sharding sharding) {
        if (kind != Kind.RAND && kind != Kind.RANDN) {
            throw new IllegalArgumentException("random: " + kind + " is not RAND or RANDN");
        }
        if (!Rules.isFloating(dtype)) {
            throw new IllegalArgumentException(kind.name().toLowerCase() + " needs a floating-point dtype");
        }
        return new FactorySpec(kind, meta(kind, shape, dtype, sharding), 0, 0, 0, seed);
    }

    private static TensorMeta meta(Kind kind, long[] shape, ScalarType dtype, Sharding sharding) {
        return Rules.factoryMeta(kind.name().toLowerCase(java.util.Locale.ROOT), new TensorMeta(shape, dtype, sharding));
    }

    @Override
    public String name() {
        return kind.name().toLowerCase(java.util.Locale.ROOT);
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 0);
        return List.of(meta);
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        ShardLayout layout = meta.layout();
        long[] local = layout.localShape(deviceId);
        long[] offsets = layout.offsets(deviceId);
        return new LocalKernel(in -> {
            try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(meta.dtype()))) {
                return switch (kind) {
                    case EMPTY -> torch.empty(local, options, new MemoryFormatOptional());
                    case ZEROS -> torch.zeros(local, options);
                    case ONES -> torch.ones(local, options);
                    case FULL -> {
                        try (Scalar s = new Scalar(value)) {
                            yield torch.full(local, s, options);
                        }
                    }
                    case ARANGE -> {
                        try (Tensor index = torch.arange(new Scalar((double) offsets[0]), new Scalar((double) (offsets[0] + local[0])),
                                 new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Double)));
                             Tensor scaled = index.mul(new Scalar(step));
                             Tensor shifted = scaled.add(new Scalar(start))) {
                            yield shifted.to(meta.dtype());
                        }
                    }
                    case RAND, RANDN -> {
                        try (Generator generator = torch.make_generator_cpu(seed);
                             Tensor whole = kind == Kind.RAND
                                 ? torch.rand(meta.shape(), new GeneratorOptional(generator), new org.bytedeco.pytorch.DimnameListOptional(), options)
                                 : torch.randn(meta.shape(), new GeneratorOptional(generator), options);
                             Tensor mine = ShardLayout.narrow(whole, offsets, local)) {
                            yield mine.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
                        }
                    }
                };
            }
        });
    }

    Kind kind() {
        return kind;
    }

    TensorMeta meta() {
        return meta;
    }

    double value() {
        return value;
    }

    double start() {
        return start;
    }

    double step() {
        return step;
    }

    long seed() {
        return seed;
    }

    /** A factory rebuilt in a worker process from its parameters; validated as the public factories do. */
    static FactorySpec restore(Kind kind, TensorMeta meta, double value, double start, double step, long seed) {
        TensorMeta checked = meta(kind, meta.shape(), meta.dtype(), meta.sharding());
        if ((kind == Kind.RAND || kind == Kind.RANDN) && !Rules.isFloating(meta.dtype())) {
            throw new IllegalArgumentException(kind.name().toLowerCase() + " needs a floating-point dtype");
        }
        return new FactorySpec(kind, checked, value, start, step, seed);
    }
}
