package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.function.LongSupplier;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.CudaFusedReduce;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Diagnostic timings, on {@code cuda:0}, of the primitives behind {@link GpuBenchmark}'s rows, to find where the
 * time of a row goes (docs/gpu.md keeps what it found): the steps of a CUDA IPC loan on the producer's side, the
 * consumer's finish event, the fused all-reduce kernel against a device copy of the same bytes, and the fixed
 * cost of a same-device all-reduce. Prints one
 * line per primitive: its p50 in microseconds after a JIT warm-up. {@code GpuProbe [iterations]}.
 *
 * <p>Not thread-safe: {@code main} runs on its thread.
 */
public final class GpuProbe {
    private static final Device GPU = Device.cuda(0);

    private GpuProbe() {
    }

    public static void main(String[] args) throws Exception {
        Cuda.loadNatives();
        int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
        DeviceStream stream = DeviceStream.of(GPU);
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor value = torch.ones(new long[] {GpuBenchmark.IPC_BYTES / Float.BYTES}, options);
             Tensor copy = torch.empty(new long[] {GpuBenchmark.IPC_BYTES / Float.BYTES}, options, new MemoryFormatOptional())) {
            stream.synchronize();
            print("lend + close (take a pooled event, record, handle, cuMemGetAddressRange, cudaIpcGetMemHandle)", iterations, () -> {
                long start = System.nanoTime();
                CudaIpcTensors.lend(value, stream).close();
                return System.nanoTime() - start;
            });
            DeviceEvent pooled = DeviceEvent.takePooledInterprocess(GPU);
            print("record an interprocess event", iterations, () -> {
                long start = System.nanoTime();
                pooled.record(stream);
                return System.nanoTime() - start;
            });
            print("create, record, query and close a plain event (a consumer's finish)", iterations, () -> {
                long start = System.nanoTime();
                try (DeviceEvent read = stream.recordEvent()) {
                    read.query();
                }
                return System.nanoTime() - start;
            });
            print("synchronize an idle stream", iterations, () -> {
                long start = System.nanoTime();
                stream.synchronize();
                return System.nanoTime() - start;
            });
            print("copy 64 MiB on the device and synchronize", Math.min(iterations, 500), () -> {
                long start = System.nanoTime();
                copy.copy_(value);
                stream.synchronize();
                return System.nanoTime() - start;
            });
            DeviceEvent.returnPooledInterprocess(pooled);
        }
        fusedAllReduce(stream);
        sameDeviceAllReduce(4, 500);
        sameDeviceAllReduce(256L * 1024 * 1024 / Float.BYTES, 20);
    }

    /**
     * A same-device all-reduce of 4 ranks in threads on {@code cuda:0}, {@code elements} floats each: rank 0's time
     * until its call returns (the protocol and the launch), and until its stream is synchronized as well.
     */
    private static void sameDeviceAllReduce(long elements, int iterations) throws Exception {
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        try (RankPool pool = new RankPool(4);
             ThreadGroupManager manager = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<ThreadGroup> groups = pool.onRanks(rank -> manager.getThreadGroup(DeviceKind.CUDA, ids, rank));
            List<Tensor> inputs = pool.onRanks(rank -> {
                try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU)) {
                    return torch.ones(new long[] {elements}, options);
                }
            });
            long[] returned = new long[1];
            RankPool.RankBody once = rank -> {
                long start = System.nanoTime();
                try (Tensor sum = groups.get(rank).allReduce(inputs.get(rank), ReduceOpType.SUM)) {
                    if (rank == 0) {
                        returned[0] = System.nanoTime() - start;
                    }
                    DeviceStream.of(GPU).synchronize();
                }
            };
            Samples calls = new Samples("call");
            print("same-device all-reduce, 4 ranks x " + elements + " float32 in threads, then synchronize (rank 0)", iterations, () -> {
                try {
                    long took = pool.time(once);
                    calls.add(returned[0]);
                    return took;
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            System.out.println(String.format(Locale.ROOT, "PROBE %-100s p50 %9.1f us", "  of which rank 0's call until it returned",
                calls.p50() / 1e3));
            inputs.forEach(Tensor::close);
        }
    }

    /** The fused kernel over 4 x 256 MiB in one launch, against a device copy of the 1 GiB of inputs. */
    private static void fusedAllReduce(DeviceStream stream) {
        int ranks = 4;
        long elements = 256L * 1024 * 1024 / Float.BYTES;
        Tensor[] ins = new Tensor[ranks];
        Tensor[] outs = new Tensor[ranks];
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor all = torch.ones(new long[] {ranks * elements}, options);
             Tensor allCopy = torch.empty(new long[] {ranks * elements}, options, new MemoryFormatOptional())) {
            for (int r = 0; r < ranks; r++) {
                try (Scalar fill = new Scalar(r + 1.0)) {
                    ins[r] = torch.full(new long[] {elements}, fill, options);
                }
                outs[r] = torch.empty(new long[] {elements}, options, new MemoryFormatOptional());
            }
            stream.synchronize();
            print("fused all-reduce kernel, 4 x 256 MiB float32, one launch", 20, () -> {
                long start = System.nanoTime();
                CudaFusedReduce.allReduceRange(ins, outs, 0, elements, CudaFusedReduce.Combine.SUM, false, stream);
                stream.synchronize();
                return System.nanoTime() - start;
            });
            print("fused all-reduce kernel, 4 launches of a quarter each", 20, () -> {
                long start = System.nanoTime();
                for (int r = 0; r < ranks; r++) {
                    CudaFusedReduce.allReduceRange(ins, outs, r * elements / ranks, elements / ranks, CudaFusedReduce.Combine.SUM, false, stream);
                }
                stream.synchronize();
                return System.nanoTime() - start;
            });
            print("device copy of 1 GiB", 20, () -> {
                long start = System.nanoTime();
                allCopy.copy_(all);
                stream.synchronize();
                return System.nanoTime() - start;
            });
            try (Tensor first = outs[3].narrow(0, elements - 1, 1)) {
                System.out.println("PROBE check: last element of the last output " + first.item_double() + " (expected 10.0)");
            }
        } finally {
            for (int r = 0; r < ranks; r++) {
                if (ins[r] != null) {
                    ins[r].close();
                }
                if (outs[r] != null) {
                    outs[r].close();
                }
            }
        }
    }

    /** Runs {@code sample} a fifth of {@code iterations} to warm up, then {@code iterations} times; prints p50 and min. */
    private static void print(String what, int iterations, LongSupplier sample) {
        for (int i = 0; i < Math.max(2, iterations / 5); i++) {
            sample.getAsLong();
        }
        Samples samples = new Samples(what);
        long min = Long.MAX_VALUE;
        for (int i = 0; i < iterations; i++) {
            long nanos = sample.getAsLong();
            samples.add(nanos);
            min = Math.min(min, nanos);
        }
        System.out.println(String.format(Locale.ROOT, "PROBE %-100s p50 %9.1f us  min %9.1f us", what, samples.p50() / 1e3, min / 1e3));
    }
}
