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
 * finishes the take. Then prints {@code STEPS ...} (p50 in us of its destGet, copy with synchronize, and destFinishGet),
 * {@code SUM <sum of the buffer>} and {@code OPENED <allocations it opened>} (one in the steady state: the mapping is
 * cached), and meets the harness at the store's barrier.
 *
 * <p>Thread-safe: stateless; {@code main} runs on its thread.
 */
public final class CudaIpcBenchPeer {

    private CudaIpcBenchPeer() {
    }

    /**
     * Times, on the last take, a second copy of the lent memory (no event to wait for any more) and a copy made by
     * an elementwise kernel instead of libtorch's memcpy path: where the first copy's time goes.
     */
    private static void diagnose(Tensor lent, Tensor buffer, DeviceStream stream) {
        long again = Long.MAX_VALUE;
        long kernel = Long.MAX_VALUE;
        try (org.bytedeco.pytorch.Scalar one = new org.bytedeco.pytorch.Scalar(1.0)) {
            for (int k = 0; k < 5; k++) {
                long start = System.nanoTime();
                buffer.copy_(lent);
                stream.synchronize();
                again = Math.min(again, System.nanoTime() - start);
                start = System.nanoTime();
                try (Tensor product = lent.mul(one)) {
                    stream.synchronize();
                }
                kernel = Math.min(kernel, System.nanoTime() - start);
            }
        }
        System.out.println("DIAG copy again " + us(again) + " / elementwise kernel copy " + us(kernel));
    }

    private static String us(long nanos) {
        return String.format(java.util.Locale.ROOT, "%.1f", nanos / 1e3);
    }

    public static void main(String[] args) throws Exception {
        Cuda.loadNatives(); // before the first tensor: libtorch decides once whether it has CUDA
        String instance = args[0];
        String key = args[1];
        int n = Integer.parseInt(args[2]);
        long elements = Long.parseLong(args[3]);
        // A diagnosis (docs/gpu.md): wait this long between the take and the copy, to tell a cost of the copy itself
        // from one of work still in flight when the take returns.
        long settleNanos = args.length > 4 ? Long.parseLong(args[4]) * 1000 : 0;
        Device gpu = Device.cuda(0);
        Cuda.setCurrentDevice(gpu);
        DeviceStream stream = DeviceStream.of(gpu);
        TensorStoreCreateInfo info = TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance).storeKey(key)
            .worldSize(2).rank(1).timeout(Duration.ofSeconds(120)).build();
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, gpu);
             Tensor buffer = torch.empty(new long[] {elements}, options, new MemoryFormatOptional());
             TensorStore store = TensorStore.create(info)) {
            System.out.println("READY");
            Samples take = new Samples("destGet");
            Samples copy = new Samples("copy and synchronize");
            Samples enqueue = new Samples("copy's enqueue");
            Samples finish = new Samples("destFinishGet");
            for (int i = 0; i < n; i++) {
                long waited = System.nanoTime();
                try (Tensor lent = store.destGet("x", stream)) {
                    long taken = System.nanoTime();
                    if (settleNanos > 0) {
                        while (System.nanoTime() - taken < settleNanos) {
                            Thread.onSpinWait();
                        }
                        taken = System.nanoTime();
                    }
                    buffer.copy_(lent);
                    long enqueued = System.nanoTime();
                    stream.synchronize();
                    long copied = System.nanoTime();
                    if (i == n - 1) {
                        diagnose(lent, buffer, stream);
                    }
                    store.destFinishGet("x", stream);
                    long finished = System.nanoTime();
                    if (i >= n / 3) { // the harness warms up for a third of the run
                        take.add(taken - waited);
                        copy.add(copied - taken);
                        enqueue.add(enqueued - taken);
                        finish.add(finished - copied);
                    }
                }
            }
            // Wall time of destGet includes waiting for the producer's next srcSet; the other two are this side's own.
            System.out.println("STEPS destGet " + us(take.p50()) + " / copy+sync " + us(copy.p50()) + " (enqueue " + us(enqueue.p50()) + ")"
                + " / destFinishGet " + us(finish.p50()));
            try (Tensor sum = buffer.sum()) {
                System.out.println("SUM " + sum.item_double());
            }
            System.out.println("OPENED " + CudaIpcTensors.mappingsOpened());
            store.barrier();
        }
        System.exit(0);
    }
}
