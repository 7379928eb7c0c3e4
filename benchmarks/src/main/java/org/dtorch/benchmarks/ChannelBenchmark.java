package org.dtorch.benchmarks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.ChannelProducer;
import org.dtorch.core.communication.channel.WorkerTensorChannel;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.Futex;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * The {@link WorkerTensorChannel}'s CPU hand-off between two JVMs against a plain File-store exchange of the same
 * bytes between two JVMs and against CPython's {@code multiprocessing.shared_memory} hand-off between two Python
 * processes ({@code benchmarks/python/bench_shm_handoff.py}). Latency per transfer: from the producer's clock before
 * it starts copying the value in to the consumer holding a copy of its own; one transfer at a time (the producer
 * starts the next once the consumer is done). The three variants take turns within each run.
 */
final class ChannelBenchmark {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));
    private static final long BYTES = 64L << 20;
    private static final int TRANSFERS = 200;
    private static final int WARMUP = 5;
    private static final long PYTHON_TIMEOUT_SECONDS = 600;

    private ChannelBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        long bytes = options.bytes(BYTES);
        int transfers = options.iterations(TRANSFERS);
        Path script = options.root().resolve("benchmarks/python/bench_shm_handoff.py");
        report.section("WorkerTensorChannel hand-off (CPU)", "channel",
            "One " + Unit.size(bytes) + " int64 tensor from a producer JVM to a consumer JVM, " + Unit.count(transfers)
                + " transfers per run after " + WARMUP + " of warm-up, one at a time: latency from the producer's clock before it "
                + "starts staging to the consumer holding a tensor of its own (the channel copies into a persistent slot and out of "
                + "it: two copies). Baselines: a File store exchange between two JVMs (`srcSet`, `destGet`, a copy of the value, "
                + "`destFinishGet`, `srcWaitUntilGetFinished`), and CPython 3's `multiprocessing.shared_memory` between two Python "
                + "processes (copy into the block, a `Pipe` message, `bytearray` copy out, a `Pipe` answer). Ratio: baseline p50 over "
                + "channel p50.");
        Comparison vsStore = new Comparison(Unit.size(bytes) + " hand-off, channel vs File store", Goal.context("context"));
        Comparison vsPython = new Comparison(Unit.size(bytes) + " hand-off, channel vs Python shared_memory", Goal.context("context"));
        List<String> p95 = new ArrayList<>();
        String instance = GlobalCommInstanceId.next();
        String flagName = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bench-channel-flags";
        SharedRegion.unlink(flagName);
        ChannelOptions channelOptions = ChannelOptions.of(instance, "bench", 1).withTimeout(Duration.ofSeconds(120));
        int blocks = options.runs() + 1; // block 0 warms up
        try (SharedRegion flags = SharedRegion.create(flagName, 64).orElseThrow();
             WorkerTensorChannel channel = WorkerTensorChannel.create(channelOptions);
             PeerJvm channelPeer = PeerJvm.start(ChannelBenchPeer.class, "channel",
                 List.of("channel", instance, "bench", String.valueOf(transfers), String.valueOf(blocks), flagName));
             PeerJvm storePeer = PeerJvm.start(ChannelBenchPeer.class, "store",
                 List.of("store", instance, "bench/channel-baseline", String.valueOf(transfers), String.valueOf(blocks), "-"));
             TensorStore store = TensorStore.create(storeInfo(instance));
             ChannelProducer producer = WorkerTensorChannel.producer(channelOptions);
             Tensor value = longs(bytes)) {
            channelPeer.awaitLine("READY");
            storePeer.awaitLine("READY");
            LongPointer first = new LongPointer(value.data_ptr());
            int sent = 0;
            for (int block = 0; block < blocks; block++) {
                for (int i = 0; i < transfers; i++) {
                    first.put(0, System.nanoTime());
                    producer.enqueue(producer.publish(value));
                    awaitFlag(flags, ++sent);
                }
                Samples viaChannel = channelPeer.samples("WorkerTensorChannel, 2 JVMs");
                for (int i = 0; i < transfers; i++) {
                    first.put(0, System.nanoTime());
                    store.srcSet("x", value, CPU, 1);
                    store.srcWaitUntilGetFinished("x", CPU);
                }
                Samples viaStore = storePeer.samples("FileTensorStore, 2 JVMs");
                Samples viaPython = python(script, transfers, bytes);
                if (block > 0) {
                    vsStore.add(viaChannel, viaStore);
                    vsPython.add(viaChannel, viaPython);
                    p95.add(String.format(Locale.ROOT, "run %d: channel %s, File store %s, Python %s", block,
                        Samples.format(viaChannel.percentile(95)), Samples.format(viaStore.percentile(95)),
                        Samples.format(viaPython.percentile(95))));
                }
            }
            store.barrier();
        } finally {
            SharedRegion.unlink(flagName);
        }
        report.comparisons(List.of(vsStore, vsPython));
        report.note("p95 per run: " + String.join("; ", p95) + ".");
    }

    /** Waits until the consumer stored {@code expected} in the flag word: the transfer is done. */
    static void awaitFlag(SharedRegion flags, int expected) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        int seen;
        while ((seen = Shm.getIntAcquire(flags.segment(), 0)) != expected) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("channel benchmark: the consumer did not finish transfer " + expected + " within 120 s");
            }
            Futex.await(flags.segment(), 0, seen, TimeUnit.MILLISECONDS.toNanos(100));
        }
    }

    /** One run of the Python baseline in a fresh pair of processes. */
    private static Samples python(Path script, int transfers, long bytes) throws IOException, InterruptedException {
        Process process = new ProcessBuilder("python3", script.toString(), String.valueOf(transfers), String.valueOf(bytes),
            String.valueOf(WARMUP)).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        byte[] out = process.getInputStream().readAllBytes();
        if (!process.waitFor(PYTHON_TIMEOUT_SECONDS, TimeUnit.SECONDS) || process.exitValue() != 0) {
            process.destroyForcibly();
            throw new IllegalStateException("channel benchmark: " + script + " failed or did not finish within " + PYTHON_TIMEOUT_SECONDS
                + " s");
        }
        Samples samples = new Samples("Python multiprocessing.shared_memory, 2 processes");
        String line = new String(out, StandardCharsets.UTF_8).lines().filter(l -> l.startsWith("SAMPLES ")).findFirst()
            .orElseThrow(() -> new IllegalStateException("channel benchmark: " + script + " printed no SAMPLES line"));
        for (String part : line.substring("SAMPLES ".length()).trim().split(" ")) {
            samples.add(Long.parseLong(part));
        }
        return samples;
    }

    private static Tensor longs(long bytes) {
        try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(torch.ScalarType.Long))) {
            return torch.ones(new long[] {bytes / 8}, options);
        }
    }

    private static TensorStoreCreateInfo storeInfo(String instance) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(instance).storeKey("bench/channel-baseline")
            .worldSize(2).rank(0).timeout(Duration.ofSeconds(120)).build();
    }
}
