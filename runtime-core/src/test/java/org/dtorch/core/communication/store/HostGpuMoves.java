package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;

/**
 * The moves between host and GPU that every store makes for a consumer of the other kind, checked the same way for
 * the Memory and the File store ({@code MemoryTensorStoreCudaTest}, {@code FileTensorStoreCudaTest}).
 *
 * <p>Not thread-safe: one test thread drives {@code store} (world size 1, rank 0).
 */
final class HostGpuMoves {
    private HostGpuMoves() {
    }

    /**
     * A CUDA value published for CPU consumers, a CPU value for CUDA consumers, and a CPU value taken onto
     * {@code gpu}'s device with {@code destGetAndToDevice}; {@code onGpu} and {@code onCpu} hold the same values.
     */
    static void check(TensorStore store, Tensor onGpu, Tensor onCpu, DeviceStream gpu, Device gpuDevice) {
        DeviceStream cpu = DeviceStream.of(Device.cpu(0));
        // A CUDA value for CPU consumers: copied to the host by the producer.
        store.srcSet("to-cpu", onGpu, gpu, 1, DeviceKind.CPU);
        try (Tensor got = store.destGet("to-cpu", cpu)) {
            assertFalse(got.is_cuda());
            assertTrue(torch.equal(got, onCpu));
        }
        store.destFinishGet("to-cpu", cpu);
        store.srcWaitUntilGetFinished("to-cpu", gpu);

        // A CPU value for CUDA consumers: published as it is; the consumer copies it to its stream's device.
        store.srcSet("to-gpu", onCpu, cpu, 1, DeviceKind.CUDA);
        try (Tensor got = store.destGet("to-gpu", gpu)) {
            assertTrue(got.is_cuda());
            assertTrue(torch.equal(got, onGpu));
        }
        store.destFinishGet("to-gpu", gpu);
        store.srcWaitUntilGetFinished("to-gpu", cpu);

        // A CPU value of no declared consumer kind, taken onto the GPU with destGetAndToDevice.
        store.srcSet("any", onCpu, cpu, 1);
        try (Tensor got = store.destGetAndToDevice("any", gpu, gpuDevice)) {
            assertTrue(got.is_cuda());
            assertTrue(torch.equal(got, onGpu));
        }
        store.destFinishGet("any", gpu);
        store.srcWaitUntilGetFinished("any", cpu);
    }
}
