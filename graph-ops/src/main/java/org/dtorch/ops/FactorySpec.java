package org.dtorch.ops;

import java.math.BigInteger;
import java.util.Locale;
import java.util.Objects;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.tensor.TorchTensors;

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
public final class FactorySpec implements SourceSpec {
    /** The factories. */
    public enum Kind { EMPTY, ZEROS, ONES, FULL, ARANGE, RAND, RANDN }

    private final Kind kind;
    private final TensorMeta meta;
    private final ScalarValue value;
    private final ScalarValue start;
    private final ScalarValue step;
    private final long seed;

    private FactorySpec(Kind kind, TensorMeta meta, ScalarValue value, ScalarValue start, ScalarValue step, long seed) {
        this.kind = kind;
        this.meta = Objects.requireNonNull(meta, "meta");
        this.value = value;
        this.start = start;
        this.step = step;
        this.seed = seed;
    }

    private static final ScalarValue ZERO = ScalarValue.ofLong(0);

    /** {@code empty}, {@code zeros} or {@code ones}. */
    public static FactorySpec of(Kind kind, long[] shape, ScalarType dtype, Sharding sharding) {
        return new FactorySpec(kind, meta(kind, shape, dtype, sharding), ZERO, ZERO, ZERO, 0);
    }

    /** {@code full(value)}; a value {@code dtype} cannot hold (NaN into an integral dtype, say) is refused. */
    public static FactorySpec full(double value, long[] shape, ScalarType dtype, Sharding sharding) {
        return full(ScalarValue.ofDouble(value), shape, dtype, sharding);
    }

    /** {@code full(value)} of an exact integer; a value {@code dtype} cannot hold is refused. */
    public static FactorySpec full(long value, long[] shape, ScalarType dtype, Sharding sharding) {
        return full(ScalarValue.ofLong(value), shape, dtype, sharding);
    }

    private static FactorySpec full(ScalarValue value, long[] shape, ScalarType dtype, Sharding sharding) {
        TensorMeta meta = meta(Kind.FULL, shape, dtype, sharding);
        value.checkFits("full", meta.dtype());
        return new FactorySpec(Kind.FULL, meta, value, ZERO, ZERO, 0);
    }

    /** {@code arange(start, end, step)}: a 1-D tensor, computed in double precision. */
    public static FactorySpec arange(double start, double end, double step, ScalarType dtype, Sharding sharding) {
        double span = (end - start) / step;
        if (step == 0 || !Double.isFinite(span) || span < 0) {
            throw new IllegalArgumentException("arange: no values from " + start + " to " + end + " by " + step);
        }
        if (span >= 0x1p63) {
            throw new IllegalArgumentException("arange: from " + start + " to " + end + " by " + step + " is more values than a long can count");
        }
        long n = (long) Math.ceil(span);
        return arange(ScalarValue.ofDouble(start), ScalarValue.ofDouble(step), n, ScalarValue.ofDouble(start + (n - 1) * step),
            dtype, sharding);
    }

    /** {@code arange(start, end, step)} of exact integers: a 1-D tensor. */
    public static FactorySpec arange(long start, long end, long step, ScalarType dtype, Sharding sharding) {
        BigInteger span = BigInteger.valueOf(end).subtract(BigInteger.valueOf(start));
        if (step == 0 || span.signum() * Long.signum(step) < 0) {
            throw new IllegalArgumentException("arange: no values from " + start + " to " + end + " by " + step);
        }
        BigInteger[] division = span.divideAndRemainder(BigInteger.valueOf(step));
        BigInteger count = division[1].signum() == 0 ? division[0] : division[0].add(BigInteger.ONE);
        if (count.bitLength() >= Long.SIZE) {
            throw new IllegalArgumentException("arange: from " + start + " to " + end + " by " + step + " is more values than a long can count");
        }
        long n = count.longValueExact();
        // start + (n - 1) * step lies between start and end, so the wrapped long arithmetic gives it exactly.
        return arange(ScalarValue.ofLong(start), ScalarValue.ofLong(step), n, ScalarValue.ofLong(start + (n - 1) * step), dtype, sharding);
    }

    private static FactorySpec arange(ScalarValue start, ScalarValue step, long n, ScalarValue last, ScalarType dtype, Sharding sharding) {
        TensorMeta meta = meta(Kind.ARANGE, new long[] {n}, dtype, sharding);
        if (n > 0) {
            start.checkFits("arange", meta.dtype());
            last.checkFits("arange", meta.dtype());
        }
        return new FactorySpec(Kind.ARANGE, meta, ZERO, start, step, 0);
    }

    /** {@code rand} (uniform in [0, 1)) or {@code randn} (standard normal) from {@code seed}. */
    public static FactorySpec random(Kind kind, long seed, long[] shape, ScalarType dtype, Sharding sharding) {
        if (kind != Kind.RAND && kind != Kind.RANDN) {
            throw new IllegalArgumentException("random: " + kind + " is not RAND or RANDN");
        }
        TensorMeta meta = meta(kind, shape, dtype, sharding);
        if (!Rules.isFloating(meta.dtype())) {
            throw new IllegalArgumentException(kind.name().toLowerCase(Locale.ROOT) + " needs a floating-point dtype");
        }
        return new FactorySpec(kind, meta, ZERO, ZERO, ZERO, seed);
    }

    /** Validates shape (no negative size, an element count a long holds), dtype and sharding, naming the factory. */
    private static TensorMeta meta(Kind kind, long[] shape, ScalarType dtype, Sharding sharding) {
        String op = kind.name().toLowerCase(Locale.ROOT);
        Objects.requireNonNull(shape, op + ": shape is null");
        Objects.requireNonNull(dtype, op + ": dtype is null");
        Objects.requireNonNull(sharding, op + ": sharding is null");
        Rules.numel(op, shape);
        return Rules.factoryMeta(op, new TensorMeta(shape, dtype, sharding));
    }

    @Override
    public TensorMeta output() {
        return meta;
    }

    @Override
    public String name() {
        return kind.name().toLowerCase(Locale.ROOT);
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        ShardLayout layout = meta.layout();
        long[] local = layout.localShape(deviceId);
        long[] offsets = layout.offsets(deviceId);
        return (ctx, in) -> java.util.Collections.singletonList(make(HostMeshes.placement(ctx, meta.sharding().mesh()), local, offsets));
    }

    /** This device's part, made on {@code device} (values equal on every device kind: random ones come from the CPU generator). */
    private Tensor make(Device device, long[] local, long[] offsets) {
        try (TensorOptions options = TorchTensors.options(meta.dtype(), device)) {
            return switch (kind) {
                case EMPTY -> torch.empty(local, options, new MemoryFormatOptional());
                case ZEROS -> torch.zeros(local, options);
                case ONES -> torch.ones(local, options);
                case FULL -> {
                    try (Scalar s = value.toScalar()) {
                        yield torch.full(local, s, options);
                    }
                }
                case ARANGE -> {
                    // Integers in int64 (exact), others in double; index * step + start, then the dtype.
                    ScalarType compute = start.isFloating() || step.isFloating() ? ScalarType.Double : ScalarType.Long;
                    try (Scalar from = new Scalar(offsets[0]); Scalar to = new Scalar(offsets[0] + local[0]);
                         TensorOptions indexOptions = TorchTensors.options(compute, device);
                         Tensor index = torch.arange(from, to, indexOptions);
                         Scalar by = step.toScalar(); Tensor scaled = index.mul(by);
                         Scalar origin = start.toScalar(); Tensor shifted = scaled.add(origin)) {
                        yield shifted.to(meta.dtype());
                    }
                }
                case RAND, RANDN -> {
                    try (TensorOptions cpuOptions = TorchTensors.options(meta.dtype(), Device.cpu(0));
                         Generator generator = torch.make_generator_cpu(seed);
                         Tensor whole = kind == Kind.RAND
                             ? torch.rand(meta.shape(), new GeneratorOptional(generator), new org.bytedeco.pytorch.DimnameListOptional(), cpuOptions)
                             : torch.randn(meta.shape(), new GeneratorOptional(generator), cpuOptions);
                         Tensor mine = ShardLayout.narrow(whole, offsets, local)) {
                        if (device.kind() == DeviceKind.CPU) {
                            yield mine.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
                        }
                        try (Tensor moved = TorchTensors.to(mine, device)) {
                            yield moved.contiguous();
                        }
                    }
                }
            };
        }
    }

    Kind kind() {
        return kind;
    }

    ScalarValue value() {
        return value;
    }

    ScalarValue start() {
        return start;
    }

    ScalarValue step() {
        return step;
    }

    long seed() {
        return seed;
    }

    /** A factory rebuilt in a worker process from its parameters; validated as the public factories do. */
    static FactorySpec restore(Kind kind, TensorMeta meta, ScalarValue value, ScalarValue start, ScalarValue step, long seed) {
        TensorMeta checked = meta(kind, meta.shape(), meta.dtype(), meta.sharding());
        if ((kind == Kind.RAND || kind == Kind.RANDN) && !Rules.isFloating(meta.dtype())) {
            throw new IllegalArgumentException(kind.name().toLowerCase(Locale.ROOT) + " needs a floating-point dtype");
        }
        if (kind == Kind.FULL) {
            value.checkFits("full", checked.dtype());
        }
        return new FactorySpec(kind, checked, value, start, step, seed);
    }
}
