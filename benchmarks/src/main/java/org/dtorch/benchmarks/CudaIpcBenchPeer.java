package org.dtorch.benchmarks;

import java.time.Duration;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The consumer JVM of {@link GpuBenchmark}'s CUDA IPC hand-off: {@code CudaIpcBenchPeer <instance> <key> <n> <elements>}.
 * Rank 1 of a File store; {@code n} times: takes key {@code x} (a float32 CUDA tensor of {@code elements} lent by
 * the harness through CUDA IPC), copies it into a buffer of its own on {@code cuda:0}, synchronizes its stream, and
 * finishes the take. Then prints {@code SUM <sum of the buffer>} and {@code OPENED <allocations it opened>} (one in
 * the steady state: the mapping is cached), and meets the harness at the store's barrier.
 *
 * <p>Thread-safe: stateless; {@code main} runs on its thread.
 */
public final class CudaIpcBenchPeer {

    private CudaIpcBenchPeer() {
    }

    public static void main(String[] args) throws Exception {
        Cuda.loadNatives(); // before the first tensor: libtorch decides once whether it has CUDA
        String instance = args[0];
        String key = args[1];
        int n = Integer.parseInt(args[2]);
        long elements = Long.parseLong(args[3]);
        Device gpu = Device.cuda(0);
        Cuda.setCurrentDevice(gpu);
        DeviceStream stream = DeviceStream.of(gpu);
        TensorStoreCreateInfo info = TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance).storeKey(key)
            .worldSize(2).rank(1).timeout(Duration.ofSeconds(120)).build();
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, gpu);
             Tensor buffer = torch.empty(new long[] {elements}, options, new MemoryFormatOptional());
             TensorStore store = TensorStore.create(info)) {
            System.out.println("READY");
            for (int i = 0; i < n; i++) {
                try (Tensor lent = store.destGet("x", stream)) {
                    buffer.copy_(lent);
                    stream.synchronize();
                    store.destFinishGet("x", stream);
                }
            }
            try (Tensor sum = buffer.sum()) {
                System.out.println("SUM " + sum.item_double());
            }
            System.out.println("OPENED " + CudaIpcTensors.mappingsOpened());
            store.barrier();
        }
        System.exit(0);
    }
}
