package org.dtorch.core.communication.promise;

import java.time.Duration;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.Await;

/**
 * Completes a File promise of the parent JVM with a CUDA tensor, as a worker on a GPU does, then stays until the
 * parent let the value go: {@code PromiseCudaChild <promiseName>}. The value is a view at element 4096 of a
 * larger tensor, written after a burst of queued GPU work, so the parent must wait for this process's event.
 */
public final class PromiseCudaChild {
    /** Elements of the value: arange(4096, 4096 + VALUE_NUMEL) + PASSES. */
    static final long VALUE_NUMEL = 1 << 16;
    static final int PASSES = 1000;

    private PromiseCudaChild() {
    }

    public static void main(String[] args) {
        Cuda.loadNatives(); // before any tensor: libtorch decides once whether it has CUDA
        try {
            TensorPromise promise = TensorPromises.fromSerialized(TensorPromiseType.FILE, args[0]);
            Device gpu = Device.cuda(0);
            try (TensorOptions options = TorchTensors.options(ScalarType.Float, gpu); Scalar one = new Scalar(1.0);
                 Tensor all = torch.arange(new Scalar(0), new Scalar(4096 + VALUE_NUMEL + 100), options)) {
                for (int i = 0; i < PASSES; i++) {
                    all.add_(one); // on this thread's current stream, which the promise records its event on
                }
                try (Tensor value = all.narrow(0, 4096, VALUE_NUMEL)) {
                    promise.setValue(value);
                }
            }
            System.out.println("SET " + CudaIpcTensors.liveLoanCount());
            Await.until(() -> CudaIpcTensors.liveLoanCount() == 0, Duration.ofSeconds(120), "the parent releases the CUDA value");
            System.out.println("RELEASED");
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }
}
