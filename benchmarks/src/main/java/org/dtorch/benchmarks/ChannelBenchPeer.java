package org.dtorch.benchmarks;

import java.time.Duration;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.channel.ChannelConsumer;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.WorkerTensorChannel;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.communication.store.TensorStoreCreateInfo;
import org.dtorch.core.communication.store.TensorStoreType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.Futex;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * The consumer process of {@link ChannelBenchmark}: {@code ChannelBenchPeer <mode> <instance> <name> <n> <blocks> <flags>}.
 * Per transfer it takes an int64 tensor whose element 0 is the producer's clock before it started the transfer, into
 * a tensor of its own, and records the latency; it prints one {@code SAMPLES} line per block of {@code n}.
 * <ul>
 *   <li>{@code channel}: consumer rank 0 of channel {@code name}: {@code receive}, {@code resolve}; then stores the
 *       transfer's number in word 0 of the flag region {@code flags} and wakes its futex, the producer's cue for
 *       the next transfer.</li>
 *   <li>{@code channelcuda}: consumer rank 0 of channel {@code name} for {@link ChannelCudaBenchmark}, CUDA tensors:
 *       {@code receive}, {@code resolve}, a synchronize of its stream (the copy out is done), then the flag as in
 *       {@code channel}; no samples (the producer times the hand-off); at the end it prints {@code COPIES <device
 *       copies this JVM's channel made>} and {@code SUM <sum of the last tensor>}.</li>
 *   <li>{@code store}: rank 1 of File store {@code name}: {@code destGet}, a copy of the value (the channel's consumer
 *       gets a tensor of its own too), {@code destFinishGet}, which the producer's {@code srcWaitUntilGetFinished}
 *       waits for.</li>
 * </ul>
 *
 * <p>Thread-safe: stateless; {@code main} runs one mode on its thread.
 */
public final class ChannelBenchPeer {
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));

    private ChannelBenchPeer() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        int n = Integer.parseInt(args[3]);
        int blocks = Integer.parseInt(args[4]);
        if (mode.equals("channelcuda")) {
            consumeOnGpu(args[1], args[2], n * blocks, args[5]);
        } else if (mode.equals("channel")) {
            ChannelOptions o = ChannelOptions.of(args[1], args[2], 1).withTimeout(Duration.ofSeconds(120));
            try (SharedRegion flags = SharedRegion.open(args[5]).orElseThrow();
                 ChannelConsumer consumer = WorkerTensorChannel.consumer(o, 0)) {
                System.out.println("READY");
                int done = 0;
                for (int block = 0; block < blocks; block++) {
                    StringBuilder samples = new StringBuilder("SAMPLES");
                    for (int i = 0; i < n; i++) {
                        try (Tensor got = (Tensor) consumer.resolve(consumer.receive())) {
                            samples.append(' ').append(System.nanoTime() - new LongPointer(got.data_ptr()).get(0));
                        }
                        Shm.putIntRelease(flags.segment(), 0, ++done);
                        Futex.wakeAll(flags.segment(), 0);
                    }
                    System.out.println(samples);
                }
            }
        } else {
            TensorStoreCreateInfo info = TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(args[1]).storeKey(args[2])
                .worldSize(2).rank(1).timeout(Duration.ofSeconds(120)).build();
            try (TensorStore store = TensorStore.create(info)) {
                System.out.println("READY");
                for (int block = 0; block < blocks; block++) {
                    StringBuilder samples = new StringBuilder("SAMPLES");
                    for (int i = 0; i < n; i++) {
                        try (Tensor view = store.destGet("x", CPU); Tensor got = view.clone()) {
                            samples.append(' ').append(System.nanoTime() - new LongPointer(got.data_ptr()).get(0));
                        }
                        store.destFinishGet("x", CPU);
                    }
                    System.out.println(samples);
                }
                store.barrier();
            }
        }
        System.exit(0);
    }

    private static void consumeOnGpu(String instance, String name, int n, String flagName) {
        Cuda.loadNatives(); // before the first tensor: libtorch decides once whether it has CUDA
        DeviceStream stream = DeviceStream.of(Device.cuda(0));
        ChannelOptions o = ChannelOptions.of(instance, name, 1).withTimeout(Duration.ofSeconds(120));
        try (SharedRegion flags = SharedRegion.open(flagName).orElseThrow();
             ChannelConsumer consumer = WorkerTensorChannel.consumer(o, 0)) {
            System.out.println("READY");
            double sum = Double.NaN;
            for (int i = 1; i <= n; i++) {
                try (Tensor got = (Tensor) consumer.resolve(consumer.receive())) {
                    stream.synchronize();
                    if (i == n) {
                        try (Tensor total = got.sum()) {
                            sum = total.item_double();
                        }
                    }
                }
                Shm.putIntRelease(flags.segment(), 0, i);
                Futex.wakeAll(flags.segment(), 0);
            }
            System.out.println("COPIES " + WorkerTensorChannel.deviceCopies());
            System.out.println("SUM " + sum);
        }
    }
}
