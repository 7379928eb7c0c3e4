package org.dtorch.core.testing;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Work that keeps a GPU busy for tens of milliseconds, so a test can show that a call returned before the
 * device finished (a few hundred small kernels do not: the GPU keeps up with the host launching them).
 */
public final class GpuLoad {
    private static final long SIDE = 8192;
    private static final int MATMULS = 3;

    private GpuLoad() {
    }

    /** Queues float32 matmuls of 8192 x 8192 (about 20 ms each on an H200) on the calling thread's current stream. */
    public static void busy(Device device) {
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, device);
             Tensor a = torch.ones(new long[] {SIDE, SIDE}, options)) {
            for (int i = 0; i < MATMULS; i++) {
                a.matmul(a).close();
            }
        }
    }
}
