package org.dtorch.core.communication.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.device.Device;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.ShmFiles;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The channel's CUDA pool: consumers as threads of the producer's process (the lender's own address and events) and
 * as a child JVM (the pool's allocation and the slots' events opened through CUDA IPC). Values exact against the
 * published tensors.
 */
@GpuTest
@Timeout(240)
class WorkerTensorChannelCudaTest {
    private static final Device GPU = Device.cuda(0);

    private final String instance = ShmFiles.freshInstance("wtcc");

    @AfterEach
    void nothingLeftBehind() {
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }

    private static Tensor onGpu(long sequence) {
        try (Tensor host = ChannelChild.payload(sequence)) {
            return TorchTensors.to(host, GPU);
        }
    }

    private static void assertSameOnGpu(Tensor expected, Object actual) {
        Tensor t = assertInstanceOf(Tensor.class, actual);
        assertTrue(t.is_cuda(), "the copy is on the GPU: " + TorchTensors.describe(t));
        try (Tensor e = expected.cpu(); Tensor a = t.cpu()) {
            assertTrue(TestTensors.same(e, a), () -> TestTensors.diff(e, a));
        }
    }

    @Test
    void shouldHandOffThroughOnePersistentPoolLentOnce() {
        ChannelOptions o = ChannelOptions.of(instance, "pool", 1).withTimeout(Duration.ofSeconds(60));
        int loans = CudaIpcTensors.liveLoanCount();
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o)) {
            CompletableFuture<Void> consumer = CompletableFuture.runAsync(() -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, 0)) {
                    for (int i = 1; i <= 200; i++) {
                        WorkerTensorRef ref = c.receive();
                        assertEquals((i - 1) % 2, ref.leaves().getFirst().slot());
                        try (Tensor expected = onGpu(i); Tensor got = (Tensor) c.resolve(ref)) {
                            assertSameOnGpu(expected, got);
                        }
                    }
                }
            });
            try (ChannelProducer p = WorkerTensorChannel.producer(o)) {
                for (int i = 1; i <= 200; i++) {
                    try (Tensor t = onGpu(i)) {
                        p.enqueue(p.publish(t));
                    }
                    assertEquals(loans + 1, CudaIpcTensors.liveLoanCount(), "one loan for the profile's pool, made once");
                }
                consumer.orTimeout(120, TimeUnit.SECONDS).join();
            }
        }
        assertEquals(loans, CudaIpcTensors.liveLoanCount(), "the pool's loan is given back when the producer closes");
    }

    @Test
    void shouldShardOnTheGpuAndSendProfilesPastTheBoundThroughHostMemory() {
        ChannelOptions o = ChannelOptions.of(instance, "shards", 3).withTimeout(Duration.ofSeconds(60)).withMaxProfiles(1);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor pooled = onGpu(1); Tensor overflow = onGpu(2)) {
            WorkerTensorRef ref = p.publish(Map.of("a", pooled, "b", overflow), 1);
            RankThreads.run(3, Duration.ofSeconds(120), rank -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, rank)) {
                    Map<?, ?> back = assertInstanceOf(Map.class, c.resolve(ref));
                    for (String key : List.of("a", "b")) {
                        Tensor whole = key.equals("a") ? pooled : overflow;
                        try (Tensor expected = whole.narrow(1, BalancedSplit.offset(33, 3, rank), BalancedSplit.size(33, 3, rank))) {
                            assertSameOnGpu(expected, back.get(key));
                        }
                    }
                }
                return null;
            });
            assertFalse(ref.leaves().stream().allMatch(l -> l.profile() >= 0), "one leaf went past the bound");
        }
    }

    @Test
    @Tag("multiprocess")
    void shouldHandOffToAConsumerJvmThroughCudaIpc() {
        ChannelOptions o = ChannelOptions.of(instance, "ipc", 1).withTimeout(Duration.ofSeconds(120));
        int n = 100;
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChildJvm child = ChildJvm.start("cuda consumer", ChannelChild.class, Map.of(), "consume", instance, "ipc", "1", "0",
                 String.valueOf(n), "cuda");
             ChannelProducer p = WorkerTensorChannel.producer(o)) {
            for (int i = 1; i <= n; i++) {
                try (Tensor t = onGpu(i)) {
                    p.enqueue(p.publish(t));
                }
            }
            child.awaitSuccess(Duration.ofSeconds(180));
        }
    }
}
