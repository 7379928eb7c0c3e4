package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class MemoryTensorStoreTest {
    private static final AtomicInteger KEYS = new AtomicInteger();
    private static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));

    private static String freshKey() {
        return "test/store-" + KEYS.incrementAndGet();
    }

    private static TensorStoreCreateInfo info(String key, int world, int rank, Duration timeout) {
        return TensorStoreCreateInfo.builder().storeKey(key).worldSize(world).rank(rank).timeout(timeout).build();
    }

    /** Creates {@code world} instances of one store on as many threads (the constructor is a barrier). */
    private static List<TensorStore> createAll(String key, int world, Duration timeout) {
        return RankThreads.run(world, rank -> TensorStore.create(info(key, world, rank, timeout)));
    }

    /** A single-participant store: every call returns or fails without peers. */
    private static TensorStore solo(Duration timeout) {
        return TensorStore.create(info(freshKey(), 1, 0, timeout));
    }

    @Test
    void shouldHandOffWithoutCopying() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(10));
        try (Tensor value = TestTensors.full(7f, 1024)) {
            List<Long> pointers = RankThreads.run(2, rank -> {
                TensorStore store = stores.get(rank);
                if (rank == 0) {
                    store.srcSet("x", value, CPU, 1);
                    store.srcWaitUntilGetFinished("x", CPU);
                    return value.data_ptr().address();
                }
                try (Tensor got = store.destGet("x", CPU)) {
                    assertTrue(TestTensors.same(value, got));
                    long address = got.data_ptr().address();
                    store.destFinishGet("x", CPU);
                    return address;
                }
            });
            assertEquals(pointers.get(0), pointers.get(1), "consumer must see the producer's memory, not a copy");
            assertEquals(1, value.use_count(), "the store must drop its reference once the exchange is done");
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldServeSeveralConsumersAndKeys() {
        int world = 4;
        List<TensorStore> stores = createAll(freshKey(), world, Duration.ofSeconds(10));
        try {
            List<Double> sums = RankThreads.run(world, rank -> {
                TensorStore store = stores.get(rank);
                try (Tensor mine = TestTensors.full(rank + 1, 3)) {
                    store.srcSet("from/" + rank, mine, CPU, world - 1);
                    double sum = rank + 1;
                    for (int other = 0; other < world; other++) {
                        if (other != rank) {
                            try (Tensor got = store.destGet("from/" + other, CPU)) {
                                sum += got.sum().item_double() / 3;
                            }
                            store.destFinishGet("from/" + other, CPU);
                        }
                    }
                    store.srcWaitUntilGetFinished("from/" + rank, CPU);
                    return sum;
                }
            });
            sums.forEach(s -> assertEquals(10.0, s));
            assertEquals(0, ((MemoryTensorStore) stores.get(0)).liveKeyCount());
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldBeReusableAfterResetAndAfterAKeyIsDone() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(10));
        try {
            for (int round = 0; round < 3; round++) {
                float value = round;
                RankThreads.runAll(2, rank -> {
                    TensorStore store = stores.get(rank);
                    if (rank == 0) {
                        try (Tensor t = TestTensors.full(value, 2)) {
                            store.srcSet("k", t, CPU, 1);
                            store.srcWaitUntilGetFinished("k", CPU);
                        }
                    } else {
                        try (Tensor got = store.destGet("k", CPU); Tensor first = got.select(0, 0)) {
                            assertEquals(value, first.item_float());
                        }
                        store.destFinishGet("k", CPU);
                    }
                });
            }
            // A key set and never waited for stays live until reset(), which clears it.
            try (Tensor t = TestTensors.full(1f, 2)) {
                stores.get(0).srcSet("left", t, CPU, 1);
                assertEquals(2, t.use_count());
                RankThreads.runAll(2, rank -> stores.get(rank).reset());
                assertEquals(1, t.use_count(), "reset must drop the store's reference");
                assertEquals(0, ((MemoryTensorStore) stores.get(0)).liveKeyCount());
                stores.get(0).srcSet("left", t, CPU, 1);
            }
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldNameKeyAndStoreWhenDestGetTimesOut() {
        try (TensorStore store = solo(Duration.ofMillis(200))) {
            CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> store.destGet("3", CPU));
            assertTrue(e.getMessage().startsWith("destGet('3') on store '" + store.storeKey() + "' (rank 0) timed out after 200 ms: no producer set this key"),
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
            assertTrue(e.getMessage().startsWith("barrier() on store '" + key + "' (rank 1) timed out after 300 ms: 1 of 2 ranks arrived"),
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
            UnsupportedOperationException gpu = assertThrows(UnsupportedOperationException.class,
                () -> store.srcSet("a", t, CPU, 1, DeviceKind.GPU));
            assertTrue(gpu.getMessage().contains("GPU issue"), gpu.getMessage());
            assertEquals(0, ((MemoryTensorStore) store).liveKeyCount(), "rejected calls must not change the store");

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
            assertEquals(1, t.use_count());
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
            Thread.sleep(100);
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
            Thread.sleep(100);
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
        Thread.sleep(100);
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

    @Test
    void shouldForgetStoresOnceEveryInstanceClosed() {
        int before = MemoryTensorStore.liveStoreCount();
        String key = freshKey();
        List<TensorStore> stores = createAll(key, 3, Duration.ofSeconds(10));
        assertEquals(before + 1, MemoryTensorStore.liveStoreCount());
        try (Tensor t = TestTensors.full(1f, 4)) {
            stores.get(0).srcSet("held", t, CPU, 2);
            assertEquals(2, t.use_count());
            stores.forEach(TensorStore::close);
            assertEquals(before, MemoryTensorStore.liveStoreCount());
            assertEquals(1, t.use_count(), "closing the last instance must drop held values");
        }
        // The key can be created again with another world size.
        TensorStore.create(info(key, 1, 0, Duration.ofSeconds(1))).close();
    }

    @Test
    void shouldSayNetworkStoresAreNotBuiltYet() {
        UnsupportedOperationException net = assertThrows(UnsupportedOperationException.class,
            () -> TensorStore.create(TensorStoreCreateInfo.builder().type(TensorStoreType.NETWORK).storeKey("n").worldSize(1).build()));
        assertTrue(net.getMessage().contains("multi-host issue"), net.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TensorStoreCreateInfo.builder().storeKey("x").worldSize(2).rank(2).build());
        assertThrows(IllegalArgumentException.class, () -> TensorStoreCreateInfo.builder().storeKey(" ").worldSize(1).build());
    }

    @Test
    void shouldMoveToTheTargetCpuDeviceWithoutCopying() {
        try (TensorStore store = solo(Duration.ofSeconds(1)); Tensor t = TestTensors.full(5f, 3)) {
            assertThrows(UnsupportedOperationException.class, () -> store.destGetAndToDevice("k", CPU, Device.gpu(0)));
            store.srcSet("k", t, CPU, 1);
            try (Tensor got = store.destGetAndToDevice("k", CPU, Device.cpu(1))) {
                assertEquals(t.data_ptr().address(), got.data_ptr().address());
            }
            store.destFinishGet("k", CPU);
            store.srcWaitUntilGetFinished("k", CPU);
        }
    }

    @Test
    @Timeout(120)
    void shouldStayBoundedOverTenThousandExchanges() {
        int world = 4;
        int exchanges = 10_000;
        List<TensorStore> stores = createAll(freshKey(), world, Duration.ofSeconds(30));
        long physicalBefore = Pointer.physicalBytes();
        List<Tensor> producerValues = new ArrayList<>();
        try {
            RankThreads.run(world, Duration.ofSeconds(100), rank -> {
                TensorStore store = stores.get(rank);
                int next = (rank + 1) % world;
                int previous = (rank + world - 1) % world;
                try (Tensor mine = TestTensors.full(rank, 256)) {
                    synchronized (producerValues) {
                        producerValues.add(mine);
                    }
                    for (int i = 0; i < exchanges / world; i++) {
                        String out = rank + "->" + next;
                        store.srcSet(out, mine, CPU, 1);
                        try (Tensor got = store.destGet(previous + "->" + rank, CPU); Tensor first = got.select(0, 0)) {
                            if (first.item_float() != previous) {
                                throw new AssertionError("rank " + rank + " got a wrong value in exchange " + i);
                            }
                        }
                        store.destFinishGet(previous + "->" + rank, CPU);
                        store.srcWaitUntilGetFinished(out, CPU);
                    }
                    if (mine.use_count() != 1) {
                        throw new AssertionError("rank " + rank + ": the store still references the value: use_count " + mine.use_count());
                    }
                }
                return null;
            });
            MemoryTensorStore any = (MemoryTensorStore) stores.get(0);
            assertEquals(0, any.liveKeyCount());
            assertEquals(0, any.heldTensorCount());
            long growth = Pointer.physicalBytes() - physicalBefore;
            assertTrue(growth < 256L * 1024 * 1024, "resident memory grew by " + growth + " bytes over " + exchanges + " exchanges");
        } finally {
            stores.forEach(TensorStore::close);
        }
    }
}
