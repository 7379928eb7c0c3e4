package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.CudaUnavailableException;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What every {@link TensorStore} backend promises, whatever carries the values: deadlines and their
 * messages, the barrier's withdrawal of a timed-out or interrupted arrival, bad input refused before any
 * change, and close waking blocked callers. Each backend's test extends it with its own.
 */
@Timeout(60)
abstract class TensorStoreContractTest {
    static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));
    private static final AtomicInteger KEYS = new AtomicInteger();

    /** The creation info of the backend under test. */
    abstract TensorStoreCreateInfo info(String key, int world, int rank, Duration timeout);

    /** Keys live in {@code store}. */
    abstract int liveKeyCount(TensorStore store);

    /** How the backend's messages name the participant {@code store}: {@code rank 0}, or more (the Network store adds its host). */
    String who(TensorStore store) {
        return "rank " + store.rank();
    }

    String freshKey() {
        return "test/store-" + getClass().getSimpleName() + "-" + KEYS.incrementAndGet();
    }

    /** Creates {@code world} instances of one store on as many threads (the constructor is a barrier). */
    List<TensorStore> createAll(String key, int world, Duration timeout) {
        return RankThreads.run(world, rank -> TensorStore.create(info(key, world, rank, timeout)));
    }

    /** A single-participant store: every call returns or fails without peers. */
    TensorStore solo(Duration timeout) {
        return TensorStore.create(info(freshKey(), 1, 0, timeout));
    }

    /** True when the backend shares what {@link TensorStore#allocate} makes (the Network store does not: hosts share no memory). */
    boolean allocates() {
        return true;
    }

    /**
     * Tensors with no element (a zero-size shard) travel like any other: their shapes and dtypes arrive, no bytes need a
     * place to live (a shared-memory region cannot be empty), and one from {@link TensorStore#allocate} is published too
     * where the backend allocates.
     */
    @Test
    void shouldExchangeTensorsWithNoElement() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(20));
        List<String> keys = allocates() ? List.of("rows", "columns", "allocated") : List.of("rows", "columns");
        try {
            List<String> seen = RankThreads.run(2, rank -> {
                TensorStore store = stores.get(rank);
                if (rank == 1) {
                    StringBuilder got = new StringBuilder();
                    for (String key : keys) {
                        try (Tensor t = store.destGet(key, CPU)) {
                            got.append(key).append('=').append(TorchTensors.describe(t)).append(' ');
                        }
                        store.destFinishGet(key, CPU);
                    }
                    return got.toString().strip();
                }
                try (Tensor rows = TestTensors.pattern(new long[] {0, 3}, ScalarType.Float, 0, 1, 0);
                     Tensor columns = TestTensors.pattern(new long[] {2, 0}, ScalarType.Long, 0, 1, 0);
                     Tensor allocated = allocates() ? store.allocate(new long[] {0}, ScalarType.Double) : null) {
                    store.srcSet("rows", rows, CPU, 1);
                    store.srcSet("columns", columns, CPU, 1);
                    if (allocated != null) {
                        store.srcSet("allocated", allocated, CPU, 1);
                    }
                    for (String key : keys) {
                        store.srcWaitUntilGetFinished(key, CPU);
                    }
                }
                return "sent";
            });
            assertEquals("rows=float32[0, 3] on cpu columns=int64[2, 0] on cpu" + (allocates() ? " allocated=float64[0] on cpu" : ""),
                seen.get(1));
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldNameKeyAndStoreWhenDestGetTimesOut() {
        try (TensorStore store = solo(Duration.ofMillis(200))) {
            CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> store.destGet("3", CPU));
            assertTrue(e.getMessage().startsWith("destGet('3') on store '" + store.storeKey() + "' (" + who(store)
                + ") timed out after 200 ms: no producer set this key"),
                e.getMessage());
        }
    }

    @Test
    void shouldCountFinishedConsumersWhenSrcWaitTimesOut() {
        try (TensorStore store = solo(Duration.ofMillis(200)); Tensor t = TestTensors.full(1f, 2)) {
            store.srcSet("result", t, CPU, 3);
            store.destGet("result", CPU).close();
            store.destGet("result", CPU).close();
            store.destFinishGet("result", CPU);
            CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> store.srcWaitUntilGetFinished("result", CPU));
            assertTrue(e.getMessage().contains("srcWaitUntilGetFinished('result')"), e.getMessage());
            assertTrue(e.getMessage().endsWith("1 of 3 consumers finished (2 took the tensor)"), e.getMessage());
            // Still usable: the missing consumers arrive and the wait completes.
            store.destFinishGet("result", CPU);
            store.destGet("result", CPU).close();
            store.destFinishGet("result", CPU);
            store.srcWaitUntilGetFinished("result", CPU);
        }
    }

    @Test
    void shouldCountArrivalsWhenBarrierTimesOutAndStayUsable() {
        String key = freshKey();
        // Two participants are expected; create the second later so the first barrier() times out.
        AtomicReference<TensorStore> first = new AtomicReference<>();
        CountDownLatch created = new CountDownLatch(1);
        Thread creator = Thread.ofPlatform().start(() -> {
            first.set(TensorStore.create(info(key, 2, 0, Duration.ofSeconds(10))));
            created.countDown();
        });
        try (TensorStore second = TensorStore.create(info(key, 2, 1, Duration.ofMillis(300)))) {
            assertTrue(created.await(10, TimeUnit.SECONDS));
            CommTimeoutException e = assertThrows(CommTimeoutException.class, second::barrier);
            assertTrue(e.getMessage().startsWith("barrier() on store '" + key + "' (" + who(second) + ") timed out after 300 ms: 1 of 2 ranks arrived"),
                e.getMessage());
            // The timed-out arrival was withdrawn: a full barrier still works.
            RankThreads.runAll(2, rank -> (rank == 0 ? first.get() : second).barrier());
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        } finally {
            creator.interrupt();
            if (first.get() != null) {
                first.get().close();
            }
        }
    }

    @Test
    void shouldRejectBadInputAndStayUsable() {
        try (TensorStore store = solo(Duration.ofMillis(200)); Tensor t = TestTensors.full(2f, 2)) {
            assertThrows(IllegalArgumentException.class, () -> store.srcSet("a", t, CPU, 0));
            assertThrows(IllegalArgumentException.class, () -> store.srcSet("a", null, CPU, 1));
            assertThrows(IllegalArgumentException.class, () -> store.srcSet("a", new Tensor(), CPU, 1));
            assertThrows(IllegalArgumentException.class, () -> store.srcSet("", t, CPU, 1));
            IllegalStateException noGet = assertThrows(IllegalStateException.class, () -> store.destFinishGet("a", CPU));
            assertTrue(noGet.getMessage().contains("no destGet of this key is outstanding"), noGet.getMessage());
            if (!Cuda.isAvailable()) {
                CudaUnavailableException gpu = assertThrows(CudaUnavailableException.class, () -> store.srcSet("a", t, CPU, 1, DeviceKind.CUDA));
                assertTrue(gpu.getMessage().contains("-Pgpu"), gpu.getMessage());
            }
            assertEquals(0, liveKeyCount(store), "rejected calls must not change the store");

            store.srcSet("a", t, CPU, 1);
            IllegalStateException live = assertThrows(IllegalStateException.class, () -> store.srcSet("a", t, CPU, 1));
            assertTrue(live.getMessage().contains("still live (set for 1 consumer, 0 took it, 0 finished)"), live.getMessage());
            IllegalStateException early = assertThrows(IllegalStateException.class, () -> store.destFinishGet("a", CPU));
            assertTrue(early.getMessage().contains("no destGet of this key is outstanding"), early.getMessage());
            IllegalStateException neverSet = assertThrows(IllegalStateException.class, () -> store.srcWaitUntilGetFinished("b", CPU));
            assertTrue(neverSet.getMessage().contains("not live"), neverSet.getMessage());

            try (Tensor got = store.destGet("a", CPU)) {
                assertTrue(TestTensors.same(t, got));
            }
            store.destFinishGet("a", CPU);
            IllegalStateException extra = assertThrows(IllegalStateException.class, () -> store.destFinishGet("a", CPU));
            assertTrue(extra.getMessage().contains("more finishes than getCount"), extra.getMessage());
            store.srcWaitUntilGetFinished("a", CPU);
        }
    }

    @Test
    void shouldRefuseASecondParticipantOfTheSameRankAtOnce() throws Exception {
        String key = freshKey();
        BlockingQueue<Object> outcomes = new LinkedBlockingQueue<>();
        for (int i = 0; i < 2; i++) {
            Thread.ofPlatform().start(() -> {
                try {
                    outcomes.add(TensorStore.create(info(key, 2, 0, Duration.ofSeconds(20))));
                } catch (RuntimeException e) {
                    outcomes.add(e);
                }
            });
        }
        List<TensorStore> created = new java.util.ArrayList<>();
        try {
            Object first = outcomes.poll(10, TimeUnit.SECONDS);
            if (first instanceof TensorStore store) {
                created.add(store);
            }
            IllegalStateException refused = assertInstanceOf(IllegalStateException.class, first,
                "the duplicate rank 0 must be refused at once, not counted as a second arrival");
            assertTrue(refused.getMessage().contains("rank 0 is already open"), refused.getMessage());
            // The real participants still meet.
            try (TensorStore rank1 = TensorStore.create(info(key, 2, 1, Duration.ofSeconds(10)))) {
                TensorStore rank0 = assertInstanceOf(TensorStore.class, outcomes.poll(10, TimeUnit.SECONDS));
                created.add(rank0);
                assertEquals(0, rank0.rank());
                assertEquals(1, rank1.rank());
            }
        } finally {
            created.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldRejectWorldSizeMismatchNamingBothValues() {
        String key = freshKey();
        try (TensorStore first = TensorStore.create(info(key, 1, 0, Duration.ofSeconds(1)))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TensorStore.create(info(key, 3, 0, Duration.ofSeconds(1))));
            assertTrue(e.getMessage().contains("worldSize 1") && e.getMessage().contains("worldSize 3"), e.getMessage());
            first.barrier();
        }
    }

    @Test
    void shouldThrowWhenInterruptedWithoutTakingAnything() throws Exception {
        try (TensorStore store = solo(Duration.ofSeconds(30)); Tensor t = TestTensors.full(3f, 2)) {
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread waiter = Thread.ofPlatform().start(() -> {
                try {
                    store.destGet("late", CPU);
                } catch (Throwable e) {
                    failure.set(e);
                }
            });
            Await.asleep(waiter); // inside destGet, waiting for the value
            waiter.interrupt();
            waiter.join(5000);
            assertInstanceOf(CommInterruptedException.class, failure.get());
            assertTrue(failure.get().getMessage().contains("destGet('late')"), failure.get().getMessage());
            store.srcSet("late", t, CPU, 1);
            store.destGet("late", CPU).close();
            store.destFinishGet("late", CPU);
            store.srcWaitUntilGetFinished("late", CPU);
        }
    }

    @Test
    void shouldLeaveOtherRanksIntactWhenOneIsInterruptedInBarrier() throws Exception {
        List<TensorStore> stores = createAll(freshKey(), 3, Duration.ofSeconds(20));
        try {
            AtomicReference<Throwable> interrupted = new AtomicReference<>();
            CountDownLatch rank0Waiting = new CountDownLatch(1);
            Thread rank0 = Thread.ofPlatform().start(() -> {
                rank0Waiting.countDown();
                stores.get(0).barrier(); // completes later with ranks 1 and 2
            });
            Thread rank1 = Thread.ofPlatform().start(() -> {
                try {
                    stores.get(1).barrier();
                } catch (Throwable e) {
                    interrupted.set(e);
                }
            });
            assertTrue(rank0Waiting.await(5, TimeUnit.SECONDS));
            Await.asleep(rank0);
            Await.asleep(rank1); // both in the barrier, waiting for rank 2
            rank1.interrupt();
            rank1.join(5000);
            assertInstanceOf(CommInterruptedException.class, interrupted.get());
            assertTrue(interrupted.get().getMessage().contains("2 of 3 ranks arrived"), interrupted.get().getMessage());
            // Rank 1 withdrew its arrival: the barrier needs rank 1 and rank 2 again, and then completes.
            Thread rank1Again = Thread.ofPlatform().start(() -> stores.get(1).barrier());
            stores.get(2).barrier();
            rank0.join(5000);
            rank1Again.join(5000);
            assertFalse(rank0.isAlive() || rank1Again.isAlive());
            RankThreads.runAll(3, rank -> stores.get(rank).barrier());
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldNameTheCallAndTheStoreForAMissingKeyAndAfterClose() {
        TensorStore store = solo(Duration.ofSeconds(30));
        String on = " on store '" + store.storeKey() + "' (" + who(store) + ")";
        try {
            assertEquals("destGet" + on + ": key must be a non-empty string, got ''",
                assertThrows(IllegalArgumentException.class, () -> store.destGet("", CPU)).getMessage());
            assertEquals("destFinishGet" + on + ": key must be a non-empty string, got null",
                assertThrows(IllegalArgumentException.class, () -> store.destFinishGet(null, CPU)).getMessage());
        } finally {
            store.close();
        }
        assertEquals("srcWaitUntilGetFinished('a')" + on + ": the store is closed",
            assertThrows(IllegalStateException.class, () -> store.srcWaitUntilGetFinished("a", CPU)).getMessage());
        assertEquals("destGet('null')" + on + ": the store is closed",
            assertThrows(IllegalStateException.class, () -> store.destGet(null, CPU)).getMessage(), "the closed check comes first");
    }

    @Test
    void shouldFailUseAfterCloseAndWakeBlockedCallers() throws Exception {
        TensorStore store = solo(Duration.ofSeconds(30));
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread waiter = Thread.ofPlatform().start(() -> {
            try {
                store.destGet("never", CPU);
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        Await.asleep(waiter); // inside destGet, waiting for the value
        store.close();
        waiter.join(5000);
        assertFalse(waiter.isAlive());
        assertInstanceOf(IllegalStateException.class, failure.get());
        assertTrue(failure.get().getMessage().contains("closed"), failure.get().getMessage());
        try (Tensor t = TestTensors.full(1f, 1)) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> store.srcSet("x", t, CPU, 1));
            assertTrue(e.getMessage().contains("closed"), e.getMessage());
        }
        store.close();
    }
}
