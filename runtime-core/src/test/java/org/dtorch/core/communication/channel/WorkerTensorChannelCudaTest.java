package org.dtorch.core.communication.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
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
 * The channel's CUDA pool and its stream-ordered protocol: consumers as threads of the producer's process (the
 * lender's own address and events) and as child JVMs (the pool's allocation, the slots' ready events and the
 * consumers' completion events opened through CUDA IPC). Values exact against the published tensors; device copies
 * counted exactly (one into the slot, one out per consumer rank).
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
        long copies = WorkerTensorChannel.deviceCopies();
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
        assertEquals(2 * 200, WorkerTensorChannel.deviceCopies() - copies,
            "device copies of 200 hand-offs to one consumer rank: one into the slot and one out each");
    }

    @Test
    void shouldShardOnTheGpuAndSendProfilesPastTheBoundThroughHostMemory() {
        ChannelOptions o = ChannelOptions.of(instance, "shards", 3).withTimeout(Duration.ofSeconds(60)).withMaxProfiles(1);
        long copies = WorkerTensorChannel.deviceCopies();
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
        assertEquals(1 + 3 + 1 + 3, WorkerTensorChannel.deviceCopies() - copies,
            "device copies: the pooled leaf staged once and one share out per rank; the leaf past the bound once to host memory "
                + "and one share back per rank");
    }

    @Test
    void shouldNeverWaitOnTheEventOfARankThatDiscarded() {
        ChannelOptions o = ChannelOptions.of(instance, "discards", 2).withTimeout(Duration.ofSeconds(60));
        int n = 50;
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o); ChannelControl control = ChannelControl.attach(o)) {
            CompletableFuture<Void> copier = CompletableFuture.runAsync(() -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, 0)) {
                    for (int i = 1; i <= n; i++) {
                        try (Tensor expected = onGpu(i); Tensor got = (Tensor) c.resolve(c.receive())) {
                            assertSameOnGpu(expected, got);
                        }
                    }
                }
            });
            CompletableFuture<Void> discarder = CompletableFuture.runAsync(() -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, 1)) {
                    for (int i = 1; i <= n; i++) {
                        c.discard(List.of(c.receive()));
                    }
                }
            });
            try (ChannelProducer p = WorkerTensorChannel.producer(o)) {
                for (int i = 1; i <= n; i++) {
                    try (Tensor t = onGpu(i)) {
                        p.enqueue(p.publish(t));
                    }
                }
                copier.orTimeout(120, TimeUnit.SECONDS).join();
                discarder.orTimeout(120, TimeUnit.SECONDS).join();
                for (int slot = 0; slot < ChannelLayout.SLOTS; slot++) {
                    assertFalse(zero(control.eventHandle(0, slot, 0)),
                        "rank 0 copied from slot " + slot + ": its completion event is published");
                    assertTrue(zero(control.eventHandle(0, slot, 1)),
                        "rank 1 only discarded: it published no completion event for slot " + slot + " (the producer would have failed "
                            + "naming it had it tried to wait on one)");
                }
            }
        }
    }

    private static boolean zero(byte[] handle) {
        return Arrays.equals(handle, new byte[handle.length]);
    }

    @Test
    @Tag("multiprocess")
    void shouldNotOverwriteASlotBeforeTheConsumersCopyRan() {
        ChannelOptions o = ChannelOptions.of(instance, "behind", 1).withTimeout(Duration.ofSeconds(120));
        int n = 40;
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChildJvm child = ChildJvm.start("cuda consumer behind its stream", ChannelChild.class, Map.of(), "consume-behind", instance,
                 "behind", "1", "0", String.valueOf(n));
             ChannelProducer p = WorkerTensorChannel.producer(o)) {
            child.awaitLine("READY", Duration.ofSeconds(120));
            for (int i = 1; i <= n; i++) {
                try (Tensor t = onGpu(i)) {
                    p.enqueue(p.publish(t));
                }
            }
            // The child's ACKs come at once while its copies wait behind its matmuls: only the producer stream's wait on
            // the child's completion events keeps slot reuse from overwriting a slot not yet copied; the child names the
            // first ref whose values came from a later one.
            child.awaitSuccess(Duration.ofSeconds(180));
        }
    }

    @Test
    @Tag("multiprocess")
    void shouldHandOffToAConsumerJvmThroughCudaIpc() {
        ChannelOptions o = ChannelOptions.of(instance, "ipc", 1).withTimeout(Duration.ofSeconds(120));
        int n = 100;
        long copies = WorkerTensorChannel.deviceCopies();
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
        assertEquals(n, WorkerTensorChannel.deviceCopies() - copies, "the producer's device copies: one into the slot per hand-off");
    }
}
