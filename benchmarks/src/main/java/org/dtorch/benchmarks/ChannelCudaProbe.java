package org.dtorch.benchmarks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.channel.ChannelConsumer;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.ChannelPhases;
import org.dtorch.core.communication.channel.ChannelProducer;
import org.dtorch.core.communication.channel.WorkerTensorChannel;
import org.dtorch.core.communication.channel.WorkerTensorRef;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Where the time of a channel hand-off goes, for the lead to run on the GPU machine in one call:
 * {@code tools/gpu-session.sh java -Dbench.root=. org.dtorch.benchmarks.ChannelCudaProbe $OUT/probe.md}. For a 64 MiB
 * and a 4 KiB float32 tensor, {@value #TRANSFERS} hand-offs after {@value #WARMUP} of warm-up, one at a time, it times
 * with {@link System#nanoTime()} what the benchmark {@code channelcuda} only sees whole: {@code publish},
 * {@code enqueue}, the consumer's wake-up (from the producer's clock before {@code enqueue} to {@code receive}
 * returning), {@code resolve}, the consumer's stream synchronize, the hand-off in total, and the channel's own phases
 * ({@link ChannelPhases}); first with the consumer a thread of this JVM, then a JVM of its own (as {@code channelcuda}
 * runs it; that JVM reports its side's samples). Without CUDA it runs the same on the CPU, to check the harness. Prints
 * the table and writes it to the path given.
 *
 * <p>Not thread-safe: one harness thread (and one consumer thread it starts).
 */
public final class ChannelCudaProbe {
    static final int TRANSFERS = 200;
    static final int WARMUP = 20;
    private static final long[] SIZES = {64L << 20, 4L << 10};
    /** The flags region's words: the consumer's count of finished hand-offs (int), the producer's clock before enqueue. */
    static final long DONE_OFFSET = 0;
    static final long ENQUEUE_CLOCK_OFFSET = 8;
    /** The consumer's measures, as both harnesses name them. */
    static final List<String> CONSUMER_MEASURES = List.of("consumer wake (enqueue begun to receive returned)", "resolve",
        "consumer stream synchronize");

    private ChannelCudaProbe() {
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args.length > 0 ? args[0] : "channel-probe.md");
        boolean cuda = Cuda.isAvailable();
        Device device = cuda ? Device.cuda(0) : Device.cpu(0);
        StringBuilder table = new StringBuilder("# WorkerTensorChannel hand-off phases (" + device + (cuda ? "" : ": no CUDA, "
            + Cuda.unavailableReason()) + ")\n\n" + TRANSFERS + " hand-offs after " + WARMUP
            + " of warm-up, one at a time; microseconds, p50 / p95.\n\n| measure | " + String.join(" | ", columns()) + " |\n|---"
            + "|---".repeat(SIZES.length * 2) + "|\n");
        List<Map<String, Samples>> results = new ArrayList<>();
        for (long bytes : SIZES) {
            results.add(inOneJvm(device, bytes));
        }
        for (long bytes : SIZES) {
            results.add(acrossJvms(device, bytes));
        }
        List<String> names = new ArrayList<>();
        results.forEach(r -> r.keySet().stream().filter(k -> !names.contains(k)).forEach(names::add));
        for (String name : names) {
            table.append("| ").append(name);
            for (Map<String, Samples> r : results) {
                Samples s = r.get(name);
                table.append(" | ").append(s == null || s.count() == 0 ? "" : us(s.p50()) + " / " + us(s.percentile(95)));
            }
            table.append(" |\n");
        }
        System.out.print(table);
        Files.writeString(out, table);
        System.exit(0);
    }

    private static List<String> columns() {
        List<String> c = new ArrayList<>();
        for (String where : List.of("threads", "2 JVMs")) {
            for (long bytes : SIZES) {
                c.add(where + ", " + Unit.size(bytes));
            }
        }
        return c;
    }

    /** Producer on this thread, consumer on another thread of this JVM. */
    private static Map<String, Samples> inOneJvm(Device device, long bytes) throws Exception {
        Map<String, Samples> samples = new LinkedHashMap<>();
        ChannelOptions options = ChannelOptions.of(GlobalCommInstanceId.next(), "probe", 1).withTimeout(Duration.ofSeconds(120));
        SynchronousQueue<long[]> done = new SynchronousQueue<>();
        long[] enqueueClock = new long[1];
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(options);
             ChannelProducer producer = WorkerTensorChannel.producer(options);
             TensorOptions tensorOptions = TorchTensors.options(ScalarType.Float, device);
             Tensor value = torch.ones(new long[] {bytes / Float.BYTES}, tensorOptions)) {
            Thread consumerThread = Thread.ofPlatform().name("probe-consumer").start(() -> {
                DeviceStream stream = DeviceStream.of(device);
                try (ChannelConsumer consumer = WorkerTensorChannel.consumer(options, 0)) {
                    for (int i = 0; i < WARMUP + TRANSFERS; i++) {
                        WorkerTensorRef ref = consumer.receive();
                        long received = System.nanoTime();
                        long wake;
                        synchronized (enqueueClock) {
                            wake = received - enqueueClock[0];
                        }
                        try (Tensor got = (Tensor) consumer.resolve(ref)) {
                            long resolved = System.nanoTime();
                            stream.synchronize();
                            done.put(new long[] {wake, resolved - received, System.nanoTime() - resolved});
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            DeviceStream.of(device).synchronize();
            produce(producer, value, samples, clock -> {
                synchronized (enqueueClock) {
                    enqueueClock[0] = clock;
                }
            }, i -> {
                long[] consumer = done.poll(30, TimeUnit.SECONDS);
                if (consumer == null) {
                    throw new IllegalStateException("channel probe: the consumer thread did not finish hand-off " + i + " within 30 s");
                }
                return consumer;
            });
            consumerThread.join(TimeUnit.SECONDS.toMillis(120));
        }
        return samples;
    }

    /** Producer on this thread, consumer in a JVM of its own ({@link ChannelBenchPeer}'s probe mode). */
    private static Map<String, Samples> acrossJvms(Device device, long bytes) throws Exception {
        Map<String, Samples> samples = new LinkedHashMap<>();
        String instance = GlobalCommInstanceId.next();
        String flagName = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-probe-flags";
        SharedRegion.unlink(flagName);
        ChannelOptions options = ChannelOptions.of(instance, "probe", 1).withTimeout(Duration.ofSeconds(120));
        try (SharedRegion flags = SharedRegion.create(flagName, 64).orElseThrow();
             WorkerTensorChannel channel = WorkerTensorChannel.create(options);
             PeerJvm peer = PeerJvm.start(ChannelBenchPeer.class, "probe", List.of("probe", instance, "probe",
                 String.valueOf(WARMUP), String.valueOf(TRANSFERS), flagName, device.kind() == DeviceKind.CUDA ? "cuda" : "cpu"));
             ChannelProducer producer = WorkerTensorChannel.producer(options);
             TensorOptions tensorOptions = TorchTensors.options(ScalarType.Float, device);
             Tensor value = torch.ones(new long[] {bytes / Float.BYTES}, tensorOptions)) {
            peer.awaitLine("READY");
            DeviceStream.of(device).synchronize();
            produce(producer, value, samples, clock -> Shm.putLongRelease(flags.segment(), ENQUEUE_CLOCK_OFFSET, clock), i -> {
                ChannelBenchmark.awaitFlag(flags, i + 1);
                return new long[0]; // the consumer JVM reports its side at the end
            });
            for (String line = peer.valueOf("PROBE"); !line.equals("END"); line = peer.valueOf("PROBE")) {
                String[] parts = line.split(" ");
                Samples s = samples.computeIfAbsent(parts[0].replace('_', ' '), Samples::new);
                for (int i = 1; i < parts.length; i++) {
                    s.add(Long.parseLong(parts[i]));
                }
            }
        } finally {
            SharedRegion.unlink(flagName);
        }
        return samples;
    }

    /** Waits until the consumer finished hand-off {@code i}; returns its samples, in {@link #CONSUMER_MEASURES}' order. */
    @FunctionalInterface
    private interface HandOffDone {
        long[] await(int i) throws Exception;
    }

    /**
     * The producer's side of {@value #WARMUP} + {@value #TRANSFERS} hand-offs of {@code value}, one at a time; records
     * its own samples, the consumer's that {@code done} returns, and then this process's {@link ChannelPhases}.
     * {@code enqueueClock} gets the clock before each {@code enqueue}.
     */
    private static void produce(ChannelProducer producer, Tensor value, Map<String, Samples> samples, LongConsumer enqueueClock,
                                HandOffDone done) throws Exception {
        for (int i = 0; i < WARMUP + TRANSFERS; i++) {
            if (i == WARMUP) {
                ChannelPhases.clear();
                ChannelPhases.enable(true);
            }
            long start = System.nanoTime();
            WorkerTensorRef ref = producer.publish(value);
            long published = System.nanoTime();
            enqueueClock.accept(published);
            producer.enqueue(ref);
            long enqueued = System.nanoTime();
            long[] consumer = done.await(i);
            if (i >= WARMUP) {
                add(samples, "hand-off total", System.nanoTime() - start);
                add(samples, "publish", published - start);
                add(samples, "enqueue", enqueued - published);
                for (int m = 0; m < consumer.length; m++) {
                    add(samples, CONSUMER_MEASURES.get(m), consumer[m]);
                }
            }
        }
        ChannelPhases.enable(false);
        addPhases(samples);
    }

    private static void add(Map<String, Samples> samples, String name, long nanos) {
        samples.computeIfAbsent(name, Samples::new).add(nanos);
    }

    private static void addPhases(Map<String, Samples> samples) {
        for (ChannelPhases.Phase phase : ChannelPhases.Phase.values()) {
            for (long nanos : ChannelPhases.drain(phase)) {
                add(samples, phaseName(phase), nanos);
            }
        }
    }

    /** A phase's row name, as both JVMs write it. */
    static String phaseName(ChannelPhases.Phase phase) {
        return "phase " + phase.name().toLowerCase(Locale.ROOT).replace('_', ' ');
    }

    private static String us(long nanos) {
        return String.format(Locale.ROOT, "%.1f", nanos / 1e3);
    }
}
