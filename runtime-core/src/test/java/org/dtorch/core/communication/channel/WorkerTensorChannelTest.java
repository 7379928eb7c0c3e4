package org.dtorch.core.communication.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.OnThread;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.ShmFiles;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The channel between threads of one JVM: real shared memory, real futex waits, values exact against the published tensors. */
@Timeout(60)
class WorkerTensorChannelTest {
    private final String instance = ShmFiles.freshInstance("wtc");
    private final int viewsBefore = ShmTensors.liveViewCount();

    @AfterEach
    void nothingLeftBehind() {
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
        assertEquals(viewsBefore, ShmTensors.liveViewCount(), "tensors still viewing shared memory");
    }

    private ChannelOptions options(int consumers) {
        return ChannelOptions.of(instance, "c", consumers).withTimeout(Duration.ofSeconds(20));
    }

    private static Tensor pattern(long shift, long... shape) {
        return TestTensors.pattern(shape, ScalarType.Float, shift, 1_000_003, 0);
    }

    private static void assertSameTensor(Tensor expected, Object actual) {
        Tensor t = assertInstanceOf(Tensor.class, actual);
        assertTrue(TestTensors.same(expected, t), () -> TestTensors.diff(expected, t));
    }

    @Test
    void shouldHandOffAThousandTransfersInOrderAlternatingTwoSlots() {
        ChannelOptions o = options(1);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o)) {
            CompletableFuture<Void> consumer = CompletableFuture.runAsync(() -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, 0)) {
                    for (int i = 1; i <= 1000; i++) {
                        WorkerTensorRef ref = c.receive();
                        assertEquals(i, ref.sequence());
                        assertEquals(0, ref.leaves().getFirst().profile(), "one profile for one shape");
                        assertEquals((i - 1) % 2, ref.leaves().getFirst().slot(), "slots used round-robin");
                        try (Tensor expected = pattern(i, 16)) {
                            assertSameTensor(expected, c.resolve(ref));
                        }
                    }
                }
            });
            try (ChannelProducer p = WorkerTensorChannel.producer(o)) {
                for (int i = 1; i <= 1000; i++) {
                    try (Tensor t = pattern(i, 16)) {
                        p.enqueue(p.publish(t));
                    }
                }
                consumer.orTimeout(30, TimeUnit.SECONDS).join();
            }
        }
    }

    @Test
    void shouldCopyLargeTensorsThroughLibtorchsThreadsWhereItHasEnough() {
        int threads = torch.get_num_threads();
        torch.set_num_threads(ShmChannelSlots.PARALLEL_COPY_MIN_THREADS);
        ChannelOptions o = options(1);
        long elements = ShmChannelSlots.PARALLEL_COPY_BYTES; // float32: 4 times the parallel copy's floor
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c = WorkerTensorChannel.consumer(o, 0);
             ChannelProducer p = WorkerTensorChannel.producer(o)) {
            for (int i = 1; i <= 3; i++) {
                try (Tensor t = pattern(i, elements)) {
                    assertSameTensor(t, c.resolve(p.publish(t)));
                }
            }
        } finally {
            torch.set_num_threads(threads);
        }
    }

    @Test
    void shouldRunTwoPublishesAheadOfTheConsumerButNotThree() throws Exception {
        ChannelOptions o = options(1);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c = WorkerTensorChannel.consumer(o, 0);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor a = pattern(1, 8); Tensor b = pattern(2, 8); Tensor d = pattern(3, 8)) {
            WorkerTensorRef first = p.publish(a);
            WorkerTensorRef second = p.publish(b);
            assertEquals(List.of(0, 1), List.of(first.leaves().getFirst().slot(), second.leaves().getFirst().slot()));
            OnThread<WorkerTensorRef> publish = OnThread.start("third-publish", () -> p.publish(d));
            Await.asleep(publish.thread());
            CompletableFuture<WorkerTensorRef> third = publish.result();
            assertFalse(third.isDone(), "the third publish must wait for the ACK of slot 0");
            assertSameTensor(a, c.resolve(first));
            WorkerTensorRef thirdRef = third.get(10, TimeUnit.SECONDS);
            assertEquals(0, thirdRef.leaves().getFirst().slot());
            assertEquals(3, thirdRef.leaves().getFirst().generation());
            assertSameTensor(b, c.resolve(second));
            assertSameTensor(d, c.resolve(thirdRef));
        }
    }

    @Test
    void shouldCollectAcksFromThreeConsumerThreads() {
        ChannelOptions o = options(3);
        int transfers = 60;
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o)) {
            CompletableFuture<List<Long>> consumers = CompletableFuture.supplyAsync(() -> RankThreads.run(3, rank -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, rank)) {
                    long seen = 0;
                    for (int i = 1; i <= transfers; i++) {
                        try (Tensor expected = pattern(i * 7L, 3, 5)) {
                            assertSameTensor(expected, c.resolve(c.receive()));
                        }
                        seen++;
                    }
                    return seen;
                }
            }));
            try (ChannelProducer p = WorkerTensorChannel.producer(o)) {
                for (int i = 1; i <= transfers; i++) {
                    try (Tensor t = pattern(i * 7L, 3, 5)) {
                        p.enqueue(p.publish(t));
                    }
                }
                assertEquals(List.of((long) transfers, (long) transfers, (long) transfers),
                    consumers.orTimeout(30, TimeUnit.SECONDS).join());
            }
        }
    }

    @Test
    void shouldLetADiscardFreeASlotWithoutACopy() throws Exception {
        ChannelOptions o = options(2);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer copier = WorkerTensorChannel.consumer(o, 0);
             ChannelConsumer canceller = WorkerTensorChannel.consumer(o, 1);
             ChannelProducer p = WorkerTensorChannel.producer(o)) {
            List<WorkerTensorRef> refs = new ArrayList<>();
            for (int i = 1; i <= 2; i++) {
                try (Tensor t = pattern(i, 4)) {
                    refs.add(p.publish(t));
                }
            }
            canceller.discard(refs);
            for (WorkerTensorRef ref : refs) {
                try (Tensor expected = pattern(ref.sequence(), 4)) {
                    assertSameTensor(expected, copier.resolve(ref));
                }
            }
            // Both slots were acknowledged, one rank by copying and one by discarding: two more publish without waiting.
            // A publish that waited for the discarded slot's ACK would end in a timeout, not return.
            try (Tensor t3 = pattern(3, 4); Tensor t4 = pattern(4, 4)) {
                List<WorkerTensorRef> more = List.of(p.publish(t3), p.publish(t4));
                canceller.discard(more);
                assertSameTensor(t3, copier.resolve(more.get(0)));
                assertSameTensor(t4, copier.resolve(more.get(1)));
            }
        }
    }

    @Test
    void shouldRefuseARefOutOfOrderAndStayUsable() {
        ChannelOptions o = options(1);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c = WorkerTensorChannel.consumer(o, 0);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor a = pattern(1, 2); Tensor b = pattern(2, 2)) {
            WorkerTensorRef first = p.publish(a);
            WorkerTensorRef second = p.publish(b);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> c.resolve(second));
            assertTrue(e.getMessage().contains("ref #2 while #1 is next"), e.getMessage());
            WorkerTensorRef foreign = new WorkerTensorRef("other", 1, first.leaves(), first.skeleton());
            IllegalArgumentException other = assertThrows(IllegalArgumentException.class, () -> c.resolve(foreign));
            assertTrue(other.getMessage().contains("a ref of another channel"), other.getMessage());
            assertThrows(IllegalArgumentException.class, () -> WorkerTensorRef.fromBytes(new byte[] {1, 2, 3}));
            assertSameTensor(a, c.resolve(WorkerTensorRef.fromBytes(first.toBytes())));
            assertSameTensor(b, c.resolve(second));
        }
    }

    @Test
    void shouldSendProfilesBeyondTheBoundThroughRegionsOfTheirOwn() {
        ChannelOptions o = options(2).withMaxProfiles(1);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c0 = WorkerTensorChannel.consumer(o, 0);
             ChannelConsumer c1 = WorkerTensorChannel.consumer(o, 1);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor kept = pattern(1, 4); Tensor over = pattern(2, 3, 3); Tensor beyond = pattern(3, 5)) {
            for (int round = 0; round < 3; round++) {
                WorkerTensorRef ref = p.publish(List.of(kept, over, beyond));
                assertEquals(List.of(0, -1, -1), ref.leaves().stream().map(WorkerTensorRef.Leaf::profile).toList());
                for (ChannelConsumer c : List.of(c0, c1)) {
                    List<?> back = assertInstanceOf(List.class, c.resolve(ref));
                    assertSameTensor(kept, back.get(0));
                    assertSameTensor(over, back.get(1));
                    assertSameTensor(beyond, back.get(2));
                }
                assertEquals(2, ShmFiles.of(instance).size(),
                    "the fallback regions are removed by the last consumer: " + ShmFiles.of(instance));
            }
            WorkerTensorRef dropped = p.publish(List.of(kept, over));
            c0.discard(List.of(dropped));
            c1.discard(List.of(dropped));
            assertEquals(2, ShmFiles.of(instance).size(), "a discarded fallback region is removed too: " + ShmFiles.of(instance));
        }
    }

    @Test
    void shouldGiveEachConsumerRankItsShareOfTheShardDim() {
        ChannelOptions o = options(3);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor whole = pattern(5, 2, 7, 3)) {
            WorkerTensorRef ref = p.publish(Map.of("latent", whole), -2);
            assertEquals(1, ref.leaves().getFirst().shardDim());
            RankThreads.run(3, rank -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, rank);
                     Tensor expected = whole.narrow(1, BalancedSplit.offset(7, 3, rank), BalancedSplit.size(7, 3, rank))) {
                    Map<?, ?> back = assertInstanceOf(Map.class, c.resolve(ref));
                    assertSameTensor(expected, back.get("latent"));
                }
                return null;
            });
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> p.publish(whole, 3));
            assertTrue(e.getMessage().contains("shard dimension 3 does not exist"), e.getMessage());
        }
    }

    /**
     * Zero-size tensors are ordinary leaves: a shard dimension shorter than the consumers gives the last ranks empty
     * shares (2 rows over 3 ranks are 1, 1, 0), a leaf with no element at all arrives with its shape, and a profile of
     * nothing but empty leaves has no byte to stage.
     */
    @Test
    void shouldHandOffEmptySharesAndLeavesWithNoElement() {
        ChannelOptions o = options(3);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor rows = pattern(3, 2, 4); Tensor nothing = pattern(0, 0, 5)) {
            WorkerTensorRef shared = p.publish(Map.of("rows", rows, "nothing", nothing), 0);
            WorkerTensorRef empty = p.publish(List.of(nothing));
            RankThreads.run(3, rank -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, rank);
                     Tensor expected = rows.narrow(0, BalancedSplit.offset(2, 3, rank), BalancedSplit.size(2, 3, rank))) {
                    Map<?, ?> back = assertInstanceOf(Map.class, c.resolve(shared));
                    assertSameTensor(expected, back.get("rows"));
                    assertSameTensor(nothing, back.get("nothing"));
                    List<?> alone = assertInstanceOf(List.class, c.resolve(empty));
                    assertSameTensor(nothing, alone.getFirst());
                }
                return null;
            });
        }
    }

    @Test
    void shouldKeepNestedStructuresAndSendARepeatedLeafOnce() {
        ChannelOptions o = options(1);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c = WorkerTensorChannel.consumer(o, 0);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor t = pattern(1, 2, 3); Tensor u = pattern(2, 4)) {
            Map<String, Object> value = new LinkedHashMap<>();
            value.put("a", t);
            value.put("b", Arrays.asList(t, u, "x", 3, null));
            value.put("c", new Object[] {u, 2.5, true, Map.of(7L, "seven")});
            byte[] bytes = p.publish(value).toBytes();
            assertTrue(bytes.length < 512, "a ref is metadata only, got " + bytes.length + " bytes");
            WorkerTensorRef ref = WorkerTensorRef.fromBytes(bytes);
            assertEquals(2, ref.leaves().size(), "the repeated leaf is sent once");
            Map<?, ?> back = assertInstanceOf(Map.class, c.resolve(ref));
            assertEquals(List.of("a", "b", "c"), List.copyOf(back.keySet()));
            List<?> b = assertInstanceOf(List.class, back.get("b"));
            Object[] cs = assertInstanceOf(Object[].class, back.get("c"));
            assertSame(back.get("a"), b.get(0), "one tensor in both places");
            assertSame(b.get(1), cs[0]);
            assertSameTensor(t, back.get("a"));
            assertSameTensor(u, cs[0]);
            assertEquals(Arrays.asList("x", 3, null), b.subList(2, 5));
            assertEquals(List.of(2.5, true, Map.of(7L, "seven")), List.of(cs[1], cs[2], cs[3]));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> p.publish(Map.of("bad", new StringBuilder())));
            assertTrue(e.getMessage().contains("java.lang.StringBuilder at value[bad]"), e.getMessage());
        }
    }

    @Test
    void shouldHoldTheContractOfOneProducerAndAFixedConsumerCount() {
        ChannelOptions o = options(2);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelProducer p = WorkerTensorChannel.producer(o)) {
            IllegalStateException second = assertThrows(IllegalStateException.class, () -> WorkerTensorChannel.producer(o));
            assertTrue(second.getMessage().contains("has a producer already"), second.getMessage());
            IllegalArgumentException count = assertThrows(IllegalArgumentException.class,
                () -> WorkerTensorChannel.consumer(ChannelOptions.of(instance, "c", 3).withTimeout(o.timeout()), 0));
            assertTrue(count.getMessage().contains("created with 2 consumer ranks"), count.getMessage());
            IllegalArgumentException rank = assertThrows(IllegalArgumentException.class, () -> WorkerTensorChannel.consumer(o, 2));
            assertTrue(rank.getMessage().contains("consumer ranks 0 to 1, got rank 2"), rank.getMessage());
            try (ChannelConsumer c = WorkerTensorChannel.consumer(o, 1)) {
                IllegalStateException twice = assertThrows(IllegalStateException.class, () -> WorkerTensorChannel.consumer(o, 1));
                assertTrue(twice.getMessage().contains("has consumer rank 1 already"), twice.getMessage());
            }
        }
    }

    @Test
    void shouldFailTheChannelOnATimeoutAndThenFailFastNamingTheCause() {
        ChannelOptions o = options(2).withTimeout(Duration.ofMillis(300));
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c0 = WorkerTensorChannel.consumer(o, 0);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor t = pattern(1, 4)) {
            WorkerTensorRef first = p.publish(t);
            p.publish(t);
            c0.resolve(first);
            CommTimeoutException timeout = assertThrows(CommTimeoutException.class, () -> p.publish(t));
            assertTrue(timeout.getMessage().contains("profile 0 slot 0 generation 1")
                    && timeout.getMessage().contains("ranks missing [1], seen [0]"),
                timeout.getMessage());
            // Failing at once, not at its deadline: the message names the earlier failure, not a timeout.
            CommException later = assertThrows(CommException.class, c0::receive);
            assertTrue(later.getMessage().contains("no longer usable") && later.getMessage().contains("ranks missing [1]"),
                later.getMessage());
        }
    }

    @Test
    void shouldNameAConsumerThatDetachedWhileTheProducerWaits() {
        ChannelOptions o = options(2);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c0 = WorkerTensorChannel.consumer(o, 0);
             ChannelProducer p = WorkerTensorChannel.producer(o);
             Tensor t = pattern(1, 4)) {
            ChannelConsumer c1 = WorkerTensorChannel.consumer(o, 1);
            c0.discard(List.of(p.publish(t), p.publish(t)));
            c1.close();
            CommException e = assertThrows(CommException.class, () -> p.publish(t));
            assertTrue(e.getMessage().contains("consumer rank 1 (pid") && e.getMessage().contains("detached without acknowledging"),
                e.getMessage());
        }
    }

    @Test
    void shouldTellAWaitingConsumerThatTheProducerDetachedWithoutFailingTheOthers() {
        ChannelOptions o = options(2);
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChannelConsumer c0 = WorkerTensorChannel.consumer(o, 0);
             ChannelConsumer c1 = WorkerTensorChannel.consumer(o, 1);
             Tensor t = pattern(1, 4)) {
            try (ChannelProducer p = WorkerTensorChannel.producer(o)) {
                p.enqueue(p.publish(t));
            }
            assertSameTensor(t, c0.resolve(c0.receive()));
            // Not waited out: the message names the detach, not a timeout.
            CommException e = assertThrows(CommException.class, c0::receive);
            assertTrue(e.getMessage().contains("waited for ref #2: the producer detached"), e.getMessage());
            assertSameTensor(t, c1.resolve(c1.receive()));
        }
    }

    @Test
    void shouldCloseInOrderAndRefuseUseAfterTheChannelClosed() {
        ChannelOptions o = options(1);
        WorkerTensorChannel channel = WorkerTensorChannel.create(o);
        ChannelConsumer c = WorkerTensorChannel.consumer(o, 0);
        ChannelProducer p = WorkerTensorChannel.producer(o);
        try (Tensor t = pattern(1, 4)) {
            WorkerTensorRef ref = p.publish(t);
            Object back = c.resolve(ref);
            ((Tensor) back).close();
            channel.close();
            CommException e = assertThrows(CommException.class, () -> p.publish(t));
            assertTrue(e.getMessage().contains("the channel was closed"), e.getMessage());
        } finally {
            c.close();
            p.close();
            channel.close();
        }
    }
}
