package org.dtorch.api;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.ops.FactorySpec;
import org.dtorch.ops.FromTensorSpec;
import org.dtorch.ops.LocalShards;
import org.dtorch.ops.Shapes;

/**
 * The factories of {@link DTorch}: tensors from a shape ({@code zeros}, {@code full}, {@code arange}, {@code rand}, ...),
 * from Java arrays or a torch tensor of the client, and from every device's own local tensor ({@code fromLocal}). Each
 * checks that its mesh is one of the runtime's, and its arguments, before anything native is allocated; then the
 * operator that makes the tensor is added.
 *
 * <p>Not thread-safe: the client thread that owns the runtime.
 */
final class Factories {
    private final DTorch runtime;

    Factories(DTorch runtime) {
        this.runtime = runtime;
    }

    DTensor of(FactorySpec.Kind kind, String op, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement[] placements) {
        return runtime.apply(FactorySpec.of(kind, shape, dtype, sharding(op, mesh, placements)));
    }

    DTensor full(double value, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement[] placements) {
        return runtime.apply(FactorySpec.full(value, shape, dtype, sharding("full", mesh, placements)));
    }

    DTensor full(long value, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement[] placements) {
        return runtime.apply(FactorySpec.full(value, shape, dtype, sharding("full", mesh, placements)));
    }

    DTensor arange(double start, double end, double step, ScalarType dtype, DeviceMesh mesh, Placement[] placements) {
        return runtime.apply(FactorySpec.arange(start, end, step, dtype, sharding("arange", mesh, placements)));
    }

    DTensor arange(long start, long end, long step, ScalarType dtype, DeviceMesh mesh, Placement[] placements) {
        return runtime.apply(FactorySpec.arange(start, end, step, dtype, sharding("arange", mesh, placements)));
    }

    DTensor random(FactorySpec.Kind kind, String op, long seed, long[] shape, ScalarType dtype, DeviceMesh mesh, Placement[] placements) {
        return runtime.apply(FactorySpec.random(kind, seed, shape, dtype, sharding(op, mesh, placements)));
    }

    DTensor tensor(Tensor data, DeviceMesh mesh, Placement[] placements) {
        return runtime.apply(new FromTensorSpec(data, sharding("tensor", mesh, placements)));
    }

    DTensor tensor(float[] data, long[] shape, DeviceMesh mesh, Placement[] placements) {
        checkData(data == null ? -1 : data.length, shape);
        Sharding sharding = sharding("tensor", mesh, placements);
        return fromPointer(new FloatPointer(data), ScalarType.Float, shape, sharding);
    }

    DTensor tensor(double[] data, long[] shape, DeviceMesh mesh, Placement[] placements) {
        checkData(data == null ? -1 : data.length, shape);
        Sharding sharding = sharding("tensor", mesh, placements);
        return fromPointer(new DoublePointer(data), ScalarType.Double, shape, sharding);
    }

    DTensor tensor(long[] data, long[] shape, DeviceMesh mesh, Placement[] placements) {
        checkData(data == null ? -1 : data.length, shape);
        Sharding sharding = sharding("tensor", mesh, placements);
        return fromPointer(new LongPointer(data), ScalarType.Long, shape, sharding);
    }

    /** {@link DTorch#fromLocal(List, DeviceMesh, long[], boolean, Placement...)}: {@link LocalShards} checks and places them. */
    DTensor fromLocal(List<Tensor> locals, DeviceMesh mesh, long[] shape, boolean checkReplicas, Placement[] placements) {
        Objects.requireNonNull(mesh, "fromLocal: mesh is null");
        runtime.checkKind("fromLocal", mesh);
        return LocalShards.fromLocal(runtime, locals, new Sharding(mesh, DTorch.placementsFor("fromLocal", mesh, placements)), shape,
            checkReplicas);
    }

    /** Checks Java data against its shape before anything native is allocated. */
    private static void checkData(long length, long[] shape) {
        if (length < 0) {
            throw new NullPointerException("tensor: data is null");
        }
        Objects.requireNonNull(shape, "tensor: shape is null");
        long numel = Shapes.numel("tensor", shape);
        if (numel != length) {
            throw new IllegalArgumentException("tensor: " + length + " values do not fill shape " + Arrays.toString(shape));
        }
    }

    /** Takes {@code data} (closing it) and makes the tensor; the copy it makes is freed if the operator is refused. */
    private DTensor fromPointer(Pointer data, ScalarType dtype, long[] shape, Sharding sharding) {
        Tensor owned;
        try (data; TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(dtype));
             Tensor view = torch.from_blob(data, shape, options)) {
            owned = view.clone(new MemoryFormatOptional(torch.MemoryFormat.Contiguous));
        }
        FromTensorSpec spec;
        try {
            spec = FromTensorSpec.owning(owned, sharding);
        } catch (RuntimeException e) {
            owned.close();
            throw e;
        }
        return runtime.apply(spec);
    }

    private Sharding sharding(String op, DeviceMesh mesh, Placement[] placements) {
        Objects.requireNonNull(mesh, op + ": mesh is null");
        runtime.checkKind(op, mesh);
        return new Sharding(mesh, DTorch.placementsFor(op, mesh, placements));
    }
}
