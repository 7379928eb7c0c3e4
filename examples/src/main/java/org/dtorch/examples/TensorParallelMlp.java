package org.dtorch.examples;

import java.nio.file.Path;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;

/**
 * A tensor-parallel MLP on a 4-device mesh, Megatron style: the first linear layer is column-parallel
 * (its weight split by output features, {@code S(0)}), so the hidden activations come out split by feature
 * ({@code S(1)}) with no communication; the second layer is row-parallel (weight split by input features,
 * {@code S(1)}), so each device holds a partial sum of the output ({@code P(sum)}); one all-reduce
 * ({@code P -> R}) gives every device the result. The result is compared with plain torch on one CPU device.
 *
 * <p>{@code --device cpu} (the default) runs on 4 CPU devices; {@code --device cuda} on 4 ranks that share
 * {@code cuda:0} ({@code devices("cuda:4").sameDevice(true)}: the same-device collectives), which needs the
 * {@code -Pgpu} build. Without the flag, the system property {@value #DEVICE_PROPERTY} chooses (the Maven command
 * passes {@code -Dexample.device} through it). A non-empty {@value #TRACE_PROPERTY} names a file for the run's trace
 * ({@code -Dexample.trace=FILE}; docs/observability.md).
 *
 * <p>Not thread-safe: a program entry point.
 */
public final class TensorParallelMlp {
    /** System property naming the device type when no {@code --device} flag is given: {@code cpu} (default) or {@code cuda}. */
    public static final String DEVICE_PROPERTY = "dtorch.example.device";
    /** System property naming the file the run's trace is written to (Chrome trace JSON); empty or absent: none. */
    public static final String TRACE_PROPERTY = "dtorch.example.trace";
    private static final String USAGE = "usage: TensorParallelMlp [--device cpu|cuda]";
    private static final long BATCH = 8;
    private static final long IN = 64;
    private static final long HIDDEN = 256;
    private static final long OUT = 32;

    private TensorParallelMlp() {
    }

    /** Runs the example on the device type of {@code --device cpu|cuda}; exits 1 when the result does not match torch. */
    public static void main(String[] args) {
        try (DTorch dt = DTorch.init(options(deviceType(args)))) {
            DeviceMesh mesh = dt.defaultMesh();
            System.out.println("mesh    " + mesh + (dt.runtime().options().sameDevice() ? " (every rank on cuda:0)" : ""));
            DTensor x = dt.randn(1, new long[] {BATCH, IN}, mesh, Placement.replicate());
            DTensor w1 = dt.randn(2, new long[] {HIDDEN, IN}, mesh, Placement.shard(0));
            DTensor b1 = dt.randn(3, new long[] {HIDDEN}, mesh, Placement.shard(0));
            DTensor w2 = dt.randn(4, new long[] {OUT, HIDDEN}, mesh, Placement.shard(1));
            DTensor b2 = dt.randn(5, new long[] {OUT}, mesh, Placement.replicate());

            DTensor hidden = dt.linear(x, w1, b1).relu();        // column-parallel: [S(1)]
            DTensor partial = dt.linear(hidden, w2, b2);          // row-parallel:    [P(sum)]
            DTensor y = partial.redistribute(Placement.replicate()); // one all-reduce:  [R]
            System.out.println("x       " + x);
            System.out.println("hidden  " + hidden);
            System.out.println("partial " + partial);
            System.out.println("y       " + y);

            TensorFuture future = y.toTorchAsync(); // returns at once; the workers are still busy
            System.out.println("future ready right after the call: " + future.isReady());
            try (Tensor result = future.get();
                 Tensor reference = referenceMlp(dt, mesh);
                 Tensor difference = result.sub(reference).abs();
                 Tensor maxDifference = difference.max()) {
                System.out.println("result[0, :6]    " + TorchTensors.format(result.select(0, 0).narrow(0, 0, 6), 6));
                System.out.println("reference[0, :6] " + TorchTensors.format(reference.select(0, 0).narrow(0, 0, 6), 6));
                double max = maxDifference.item_double();
                boolean close = torch.allclose(result, reference, 1e-4, 1e-4, false);
                System.out.printf("max |distributed - single-device torch| = %.3g -> %s%n", max, close ? "MATCH" : "MISMATCH");
                if (!close) {
                    System.exit(1);
                }
            }
        }
    }

    /** {@code cpu} or {@code cuda}: the {@code --device} flag, else {@value #DEVICE_PROPERTY}, else {@code cpu}. */
    static String deviceType(String[] args) {
        String device = System.getProperty(DEVICE_PROPERTY, "cpu");
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--device")) {
                if (i + 1 == args.length) {
                    throw new IllegalArgumentException("--device needs a value, cpu or cuda; " + USAGE);
                }
                device = args[++i];
            } else if (args[i].startsWith("--device=")) {
                device = args[i].substring("--device=".length());
            } else {
                throw new IllegalArgumentException("unknown argument '" + args[i] + "'; " + USAGE);
            }
        }
        if (!device.equals("cpu") && !device.equals("cuda")) {
            throw new IllegalArgumentException("unknown device type '" + device + "' (expected cpu or cuda); " + USAGE);
        }
        return device;
    }

    /**
     * 4 CPU devices, or 4 ranks on {@code cuda:0} (the same-device backend, so they fit on one GPU); traced to the file
     * {@value #TRACE_PROPERTY} names, if any.
     */
    static DTorchOptions options(String deviceType) {
        DTorchOptions.Builder options = deviceType.equals("cuda")
            ? DTorchOptions.builder().devices("cuda:4").sameDevice(true)
            : DTorchOptions.builder().devices(4);
        String trace = System.getProperty(TRACE_PROPERTY, "");
        if (!trace.isEmpty()) {
            options.trace(Path.of(trace));
        }
        return options.build();
    }

    /** The same MLP in plain torch on one device, with the same seeded weights. */
    private static Tensor referenceMlp(DTorch dt, DeviceMesh mesh) {
        DeviceMesh one = dt.mesh(mesh.deviceIds().getFirst());
        try (Tensor x = dt.randn(1, new long[] {BATCH, IN}, one).toTorch();
             Tensor w1 = dt.randn(2, new long[] {HIDDEN, IN}, one).toTorch();
             Tensor b1 = dt.randn(3, new long[] {HIDDEN}, one).toTorch();
             Tensor w2 = dt.randn(4, new long[] {OUT, HIDDEN}, one).toTorch();
             Tensor b2 = dt.randn(5, new long[] {OUT}, one).toTorch();
             Tensor h = torch.linear(x, w1, new TensorOptional(b1));
             Tensor activated = h.relu()) {
            return torch.linear(activated, w2, new TensorOptional(b2));
        }
    }
}
