package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.ChannelProducer;
import org.dtorch.core.communication.channel.WorkerTensorChannel;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The {@link WorkerTensorChannel}'s CUDA hand-off between two JVMs on one GPU against {@code torch.multiprocessing}'s
 * CUDA sharing of the same bytes between two Python processes ({@code bench_gpu_torch.py --handoff}, the hand-off
 * {@link GpuBenchmark} compares too). One 64 MiB float32 CUDA tensor per transfer, one transfer at a time, measured on
 * the producer's clock from before {@code publish} to the consumer's signal that it holds a copy of its own with the
 * copy finished on its stream (the Python consumer copies, synchronizes and acks the same way). Reports p50 and p95
 * of each side, the ratio of the p50s against the goal (at most 0.5x of {@code torch.multiprocessing}), and
 * the device copies per hand-off counted by both JVMs ({@link WorkerTensorChannel#deviceCopies()}). Skips, saying
 * why, where this process has no CUDA.
 *
 * <p>Not thread-safe: one harness thread.
 */
final class ChannelCudaBenchmark {
    private static final String TITLE = "WorkerTensorChannel hand-off (CUDA, one GPU)";
    private static final Device GPU = Device.cuda(0);
    private static final int TRANSFERS = 200;
    private static final int WARMUP = 20;
    private static final double GOAL = 0.5;

    private ChannelCudaBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        if (!Cuda.isAvailable()) {
            report.section(TITLE, "channelcuda", "Skipped: " + Cuda.unavailableReason() + ".");
            System.err.println("benchmark channelcuda skipped: " + Cuda.unavailableReason());
            return;
        }
        int transfers = options.iterations(TRANSFERS);
        long elements = GpuBenchmark.IPC_BYTES / Float.BYTES;
        GpuBenchmark.PyTorchSide python = GpuBenchmark.pytorch(options.root(),
            List.of("--handoff", String.valueOf(transfers), String.valueOf(WARMUP)),
            List.of("ipc_p50_us", "ipc_p95_us", "ipc_copy_p50_us"));
        Map<String, Double> py = python.figures();
        Samples samples = new Samples("WorkerTensorChannel CUDA, 2 JVMs");
        String instance = GlobalCommInstanceId.next();
        String flagName = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-channelcuda-flags";
        SharedRegion.unlink(flagName);
        ChannelOptions channelOptions = ChannelOptions.of(instance, "bench-cuda", 1).withTimeout(Duration.ofSeconds(120));
        long copiesBefore = WorkerTensorChannel.deviceCopies();
        long producerCopies;
        long consumerCopies;
        try (SharedRegion flags = SharedRegion.create(flagName, 64).orElseThrow();
             WorkerTensorChannel channel = WorkerTensorChannel.create(channelOptions);
             PeerJvm peer = PeerJvm.start(ChannelBenchPeer.class, "channelcuda",
                 List.of("channelcuda", instance, "bench-cuda", String.valueOf(WARMUP + transfers), "1", flagName));
             ChannelProducer producer = WorkerTensorChannel.producer(channelOptions);
             TensorOptions tensorOptions = TorchTensors.options(ScalarType.Float, GPU);
             Tensor value = torch.ones(new long[] {elements}, tensorOptions)) {
            peer.awaitLine("READY");
            DeviceStream.of(GPU).synchronize();
            for (int i = 0; i < WARMUP + transfers; i++) {
                long start = System.nanoTime();
                producer.enqueue(producer.publish(value));
                ChannelBenchmark.awaitFlag(flags, i + 1);
                if (i >= WARMUP) {
                    samples.add(System.nanoTime() - start);
                }
            }
            producerCopies = WorkerTensorChannel.deviceCopies() - copiesBefore;
            consumerCopies = Long.parseLong(peer.valueOf("COPIES"));
            double sum = Double.parseDouble(peer.valueOf("SUM"));
            if (sum != elements) {
                throw new IllegalStateException("channelcuda: the consumer's last copy sums to " + sum + ", expected " + elements);
            }
        } finally {
            SharedRegion.unlink(flagName);
        }
        int handoffs = WARMUP + transfers;
        double copiesPerHandoff = (double) (producerCopies + consumerCopies) / handoffs;
        double p50 = samples.p50() / 1e3;
        double ratio = p50 / py.get("ipc_p50_us");
        report.sectionRunOnce(TITLE, "tools/gpu-session.sh bench",
            python.device() + " (cuda:0), against PyTorch " + python.version() + " in the same call. One "
                + Unit.size(GpuBenchmark.IPC_BYTES)
                + " float32 CUDA tensor from a producer JVM to a consumer JVM, " + transfers + " transfers after " + WARMUP
                + " of warm-up, one at a time: from the producer's clock before `publish` to the consumer's signal (a futex word) that "
                + "its copy is done on its stream (`resolve`, then a stream synchronize). Baseline: `torch.multiprocessing` (spawn), "
                + "the same tensor put on a Queue, the consumer copying it into a buffer of its own, synchronizing and acking on "
                + "another Queue.");
        report.note("| measure | DTorch for the JVM | torch.multiprocessing | ratio | goal |\n|---|---|---|---|---|\n"
            + "| hand-off p50 / p95, us | " + GpuBenchmark.f(p50) + " / " + GpuBenchmark.f(samples.percentile(95) / 1e3) + " | "
            + GpuBenchmark.f(py.get("ipc_p50_us")) + " / " + GpuBenchmark.f(py.get("ipc_p95_us")) + " (its consumer's copy+sync "
            + GpuBenchmark.f(py.get("ipc_copy_p50_us")) + ") | " + GpuBenchmark.f(ratio) + "x | "
            + GpuBenchmark.verdict("p50 <= " + GOAL + "x of torch.multiprocessing", ratio <= GOAL) + " |\n"
            + "| device copies per hand-off | " + GpuBenchmark.f(copiesPerHandoff) + " (producer " + producerCopies + ", consumer "
            + consumerCopies + " over " + handoffs + ") | 1 (the consumer's copy out of the shared storage) | | 2: one into the slot, "
            + "one out per consumer rank |\n"
            + "| floor: one device-to-device copy of the bytes, us | "
            + GpuBenchmark.f(GpuBenchmark.deviceCopyNanos(GpuBenchmark.IPC_BYTES) / 1e3)
            + " | | | |");
    }
}
