package org.dtorch.core.communication.store;

import java.time.Duration;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.shm.Processes;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.Await;

/**
 * One participant of a File store on CUDA in a child JVM, for {@link FileTensorStoreCudaProcessTest}:
 * {@code CudaStoreChild <scenario> <instance> <storeKey> <worldSize> <rank>}. Prints progress lines the test
 * waits for; exits 0 when its scenario passed.
 */
public final class CudaStoreChild {
    static final Device GPU = Device.cuda(0);
    /** Matrix multiplications of 8192 x 8192 floats queued before a value's last write: a second or more of GPU work. */
    static final int BUSY_MATMULS = 100;

    private CudaStoreChild() {
    }

    public static void main(String[] args) {
        Cuda.loadNatives(); // before any tensor: libtorch decides once whether it has CUDA
        String scenario = args[0];
        TensorStoreCreateInfo info = TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(args[1]).storeKey(args[2])
            .worldSize(Integer.parseInt(args[3])).rank(Integer.parseInt(args[4])).timeout(Duration.ofSeconds(60)).build();
        try {
            DeviceStream stream = DeviceStream.create(GPU);
            stream.makeCurrent();
            switch (scenario) {
                case "lend-blocks" -> lendBlocks(info, stream);
                case "lend-twice" -> lendTwice(info, stream);
                case "lend-busy-and-wait" -> {
                    TensorStore store = TensorStore.create(info);
                    try (Tensor value = busyOnes(stream)) {
                        store.srcSet("held", value, stream, 1);
                        System.out.println("SET");
                        store.srcWaitUntilGetFinished("held", stream); // the test kills us here
                    }
                }
                case "take-until-the-producer-dies" -> {
                    takeUntilTheProducerDies(info, stream);
                    return; // halted
                }
                case "take-and-hang" -> {
                    TensorStore store = TensorStore.create(info);
                    Tensor got = store.destGet("held", stream);
                    try (Tensor sum = got.sum()) {
                        System.out.println("TOOK " + sum.item_double());
                    }
                    Thread.sleep(Duration.ofMinutes(5)); // the test kills us here
                }
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            }
            System.out.println("OK");
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }

    static TensorOptions floats() {
        return TorchTensors.options(ScalarType.Float, GPU);
    }

    /**
     * Queues {@link #BUSY_MATMULS} products of 8192 x 8192 ones on the current stream and returns the last
     * product (every element 8192), whose final write is still seconds away when this returns.
     */
    static Tensor busyOnes(DeviceStream stream) {
        try (TensorOptions options = floats(); Tensor x = torch.ones(new long[] {8192, 8192}, options)) {
            Tensor y = torch.empty(new long[] {8192, 8192}, options, new org.bytedeco.pytorch.MemoryFormatOptional());
            for (int i = 0; i < BUSY_MATMULS; i++) {
                torch.mm_out(y, x, x);
            }
            return y;
        }
    }

    /**
     * Two small tensors allocated back to back (one allocation of libtorch's caching allocator, different offsets),
     * a narrowed view (not contiguous, storage offset 3) and two rows of a 64 x 64 tensor (contiguous, storage
     * offset 640), all written again after a second of queued GPU work, so a consumer that did not wait for the
     * producer's event would read the old values.
     */
    private static void lendBlocks(TensorStoreCreateInfo info, DeviceStream stream) {
        try (TensorStore store = TensorStore.create(info); TensorOptions options = floats(); Scalar one = new Scalar(1.0);
             Tensor a = torch.full(new long[] {256}, new Scalar(3.0), options); Tensor b = torch.full(new long[] {256}, new Scalar(5.0), options);
             Tensor flat = torch.arange(new Scalar(0), new Scalar(4096), options); Tensor big = flat.reshape(64, 64)) {
            try (Tensor busy = busyOnes(stream)) {
                a.add_(one);
                b.add_(one);
                big.add_(one);
            }
            try (Tensor narrowed = big.narrow(1, 3, 5); Tensor rows = big.narrow(0, 10, 2)) {
                store.srcSet("a", a, stream, 1);
                store.srcSet("b", b, stream, 1);
                store.srcSet("narrowed", narrowed, stream, 1);
                store.srcSet("rows", rows, stream, 1);
                System.out.println("SET " + CudaIpcTensors.liveLoanCount());
                for (String key : new String[] {"a", "b", "narrowed", "rows"}) {
                    store.srcWaitUntilGetFinished(key, stream);
                }
            }
            // Stream-ordered after the consumer's reads, which finished before srcWaitUntilGetFinished returned.
            big.zero_();
            stream.synchronize();
            if (CudaIpcTensors.liveLoanCount() != 0) {
                throw new AssertionError(CudaIpcTensors.liveLoanCount() + " loans still open after every consumer finished");
            }
        }
    }

    /** One tensor lent twice: the second time with new values, written in place after the first exchange. */
    private static void lendTwice(TensorStoreCreateInfo info, DeviceStream stream) {
        try (TensorStore store = TensorStore.create(info); TensorOptions options = floats();
             Tensor value = torch.full(new long[] {1 << 20}, new Scalar(1.0), options)) {
            store.srcSet("first", value, stream, 1);
            store.srcWaitUntilGetFinished("first", stream);
            value.fill_(new Scalar(2.0));
            store.srcSet("second", value, stream, 1);
            store.srcWaitUntilGetFinished("second", stream);
        }
    }

    /**
     * Takes a value whose producer's GPU work is still running, waits until the test killed the producer, then
     * finishes and meets the barrier: one of them must fail with the producer's death, within the liveness window.
     * Prints {@code FAILED <millis> <message>} (or {@code FINISHED} if nothing failed) and the mappings left; halts
     * without running CUDA's exit handlers (the stream may wait forever for a dead process's event).
     */
    private static void takeUntilTheProducerDies(TensorStoreCreateInfo info, DeviceStream stream) {
        FileTensorStore store = (FileTensorStore) TensorStore.create(info);
        int producer = store.participantPids()[0];
        Tensor got = store.destGet("held", stream);
        Tensor sum = got.sum(); // queued behind the producer's event; not awaited
        System.out.println("TOOK");
        Await.until(() -> !Processes.isAlive(producer), Duration.ofSeconds(60), "the test kills the producer");
        long start = System.nanoTime();
        try {
            store.destFinishGet("held", stream);
            store.barrier();
            System.out.println("FINISHED");
        } catch (CommException e) {
            System.out.println("FAILED " + (System.nanoTime() - start) / 1_000_000 + " " + e.getMessage().replace('\n', ' '));
        }
        sum.close();
        got.close();
        store.close();
        System.out.println("MAPPINGS " + CudaIpcTensors.mappingCount() + " VIEWS " + CudaIpcTensors.liveViewCount());
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
