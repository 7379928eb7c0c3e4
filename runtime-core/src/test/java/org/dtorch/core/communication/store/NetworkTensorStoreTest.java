package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Network store's protocol with its participants as threads of this process, each rank given a host of its own
 * ({@code node-<rank>}), so that every byte goes through the rendezvous and Gloo as between hosts;
 * {@code NetworkTensorStoreProcessTest} runs it across JVMs.
 */
class NetworkTensorStoreTest extends TensorStoreContractTest {
    private static RendezvousServer server;

    @BeforeAll
    static void startRendezvous() {
        server = RendezvousServer.start("127.0.0.1", 0);
    }

    @AfterAll
    static void stopRendezvous() {
        server.close();
    }

    @Override
    TensorStoreCreateInfo info(String key, int world, int rank, Duration timeout) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.NETWORK).storeKey(key).worldSize(world).rank(rank).timeout(timeout)
            .rendezvous(server.address()).hostId("node-" + rank).build();
    }

    @Override
    int liveKeyCount(TensorStore store) {
        return ((NetworkTensorStore) store).liveKeyCount();
    }

    @Override
    boolean allocates() {
        return false;
    }

    @Override
    String who(TensorStore store) {
        return "rank " + store.rank() + " on host 'node-" + store.rank() + "'";
    }

    @Test
    void shouldHandOneValueToTwoConsumersExactlyAndWaitForBothFinishes() throws Exception {
        List<TensorStore> stores = createAll(freshKey(), 3, Duration.ofSeconds(20));
        try (Tensor floats = TestTensors.pattern(new long[] {257, 129}, ScalarType.Float, 7, 1009, -500);
             Tensor longs = TestTensors.pattern(new long[] {3, 5}, ScalarType.Long, 3, 1L << 40, 1L << 52);
             Tensor strided = floats.t()) {
            CountDownLatch secondMayFinish = new CountDownLatch(1);
            AtomicBoolean secondFinishing = new AtomicBoolean();
            AtomicBoolean producerReturned = new AtomicBoolean();
            AtomicReference<Thread> producer = new AtomicReference<>();
            RankThreads.runAll(3, rank -> {
                TensorStore store = stores.get(rank);
                if (rank == 0) {
                    producer.set(Thread.currentThread());
                    store.srcSet("floats", floats, CPU, 2);
                    store.srcSet("longs", longs, CPU, 2);
                    store.srcSet("strided", strided, CPU, 2); // copied once into a contiguous value
                    store.srcWaitUntilGetFinished("longs", CPU);
                    store.srcWaitUntilGetFinished("strided", CPU);
                    store.srcWaitUntilGetFinished("floats", CPU);
                    producerReturned.set(true);
                    assertTrue(secondFinishing.get(), "srcWaitUntilGetFinished returned before the second consumer finished");
                    return;
                }
                for (String key : List.of("longs", "strided")) {
                    try (Tensor got = store.destGet(key, CPU)) {
                        Tensor expected = key.equals("longs") ? longs : strided;
                        assertTrue(TestTensors.same(expected, got), () -> TestTensors.diff(expected, got));
                        assertTrue(got.is_contiguous());
                    }
                    store.destFinishGet(key, CPU);
                }
                try (Tensor got = store.destGet("floats", CPU)) {
                    assertTrue(TestTensors.same(floats, got), () -> TestTensors.diff(floats, got));
                    assertFalse(got.data_ptr().address() == floats.data_ptr().address(), "a consumer owns its bytes");
                }
                if (rank == 2) {
                    await(secondMayFinish); // holds its take until rank 1 has looked at the producer
                    secondFinishing.set(true);
                }
                store.destFinishGet("floats", CPU);
                if (rank == 1) {
                    Await.asleep(producer.get()); // the producer waits for the second consumer's finish
                    assertFalse(producerReturned.get(), "the producer's wait returned with one consumer of two finished");
                    secondMayFinish.countDown();
                }
            });
            assertEquals(List.of(0, 0, 0), stores.stream().map(this::liveKeyCount).toList());
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldMoveEveryDtypeAndEmptyAndScalarValuesBetweenHosts() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(20));
        ScalarType[] dtypes = {ScalarType.Float, ScalarType.Double, ScalarType.Half, ScalarType.BFloat16, ScalarType.Long, ScalarType.Int,
            ScalarType.Short, ScalarType.Char, ScalarType.Byte, ScalarType.Bool};
        long[][] shapes = {{3, 4}, {0, 5}, {}, {1 << 20}};
        try {
            RankThreads.runAll(2, rank -> {
                TensorStore store = stores.get(rank);
                for (ScalarType dtype : dtypes) {
                    for (long[] shape : shapes) {
                        String key = dtype + java.util.Arrays.toString(shape);
                        try (Tensor value = TestTensors.pattern(shape, dtype, 5, 97, 3)) {
                            if (rank == 0) {
                                store.srcSet(key, value, CPU, 1);
                                store.srcWaitUntilGetFinished(key, CPU);
                            } else {
                                try (Tensor got = store.destGet(key, CPU)) {
                                    assertTrue(TestTensors.same(value, got), () -> key + ": " + TestTensors.diff(value, got));
                                }
                                store.destFinishGet(key, CPU);
                            }
                        }
                    }
                }
            });
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldDropLiveValuesAtResetAndExchangeAgainAfterIt() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(20));
        try {
            RankThreads.runAll(2, rank -> {
                TensorStore store = stores.get(rank);
                try (Tensor old = TestTensors.full(1f, 4); Tensor fresh = TestTensors.full(2f, 4)) {
                    if (rank == 0) {
                        store.srcSet("k", old, CPU, 1); // never taken
                    }
                    store.reset();
                    assertEquals(0, liveKeyCount(store));
                    if (rank == 0) {
                        store.srcSet("k", fresh, CPU, 1); // the key is free again
                        store.srcWaitUntilGetFinished("k", CPU);
                    } else {
                        try (Tensor got = store.destGet("k", CPU)) {
                            assertTrue(TestTensors.same(fresh, got), () -> TestTensors.diff(fresh, got));
                        }
                        store.destFinishGet("k", CPU);
                    }
                    store.barrier();
                }
            });
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldLetAConsumerBeyondTheCountWaitForTheNextSet() {
        List<TensorStore> stores = createAll(freshKey(), 3, Duration.ofSeconds(20));
        try {
            List<Double> got = RankThreads.run(3, rank -> {
                TensorStore store = stores.get(rank);
                if (rank == 0) {
                    for (float v = 1; v <= 2; v++) {
                        try (Tensor t = TestTensors.full(v, 3)) {
                            store.srcSet("round", t, CPU, 1); // one consumer per set: the other waits for the next
                            store.srcWaitUntilGetFinished("round", CPU);
                        }
                    }
                    return 0.0;
                }
                try (Tensor t = store.destGet("round", CPU)) {
                    store.destFinishGet("round", CPU);
                    return t.sum().item_double() / 3;
                }
            });
            assertEquals(3.0, got.get(1) + got.get(2), "each set went to exactly one consumer: " + got);
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldServeConcurrentTakesOfOneRankWhateverTheOrderOfTheSets() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(20));
        int keys = 6;
        try {
            RankThreads.runAll(2, rank -> {
                TensorStore store = stores.get(rank);
                if (rank == 0) {
                    for (int k = keys - 1; k >= 0; k--) { // the last key first
                        try (Tensor t = TestTensors.full(k, 1000 + k)) {
                            store.srcSet("k" + k, t, CPU, 1);
                        }
                    }
                    for (int k = 0; k < keys; k++) {
                        store.srcWaitUntilGetFinished("k" + k, CPU);
                    }
                    return;
                }
                // Every key taken by a thread of its own, all on rank 1's one instance, at once.
                RankThreads.runAll(keys, k -> {
                    try (Tensor got = store.destGet("k" + k, CPU); Tensor expected = TestTensors.full(k, 1000 + k)) {
                        assertTrue(TestTensors.same(expected, got), () -> "k" + k + ": " + TestTensors.diff(expected, got));
                    }
                    store.destFinishGet("k" + k, CPU);
                });
            });
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldReuseReceivedMemoryOnlyOnceItsTakerReleasedIt() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(20));
        try (Tensor value = TestTensors.full(3f, 1 << 18)) { // 1 MiB: kept for reuse
            List<long[]> addresses = RankThreads.run(2, rank -> {
                TensorStore store = stores.get(rank);
                long[] seen = new long[3];
                Tensor held = null;
                for (int i = 0; i < 3; i++) {
                    if (rank == 0) {
                        store.srcSet("v", value, CPU, 1);
                        store.srcWaitUntilGetFinished("v", CPU);
                        continue;
                    }
                    Tensor got = store.destGet("v", CPU);
                    seen[i] = got.data_ptr().address();
                    assertTrue(TestTensors.same(value, got));
                    store.destFinishGet("v", CPU);
                    if (i == 0) {
                        held = got; // held to the end
                    } else {
                        got.close();
                    }
                }
                if (held != null) {
                    held.close();
                }
                return seen;
            });
            long[] seen = addresses.get(1);
            assertTrue(seen[1] != seen[0], "memory still held by its taker was handed out again");
            assertEquals(seen[1], seen[2], "released memory was not reused");
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldNameTheMissingRanksWhenCreationTimesOut() {
        String key = freshKey();
        long start = System.nanoTime();
        CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> TensorStore.create(info(key, 3, 1, Duration.ofMillis(800))));
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(e.getMessage().startsWith("creating store '" + key + "' (rank 1 on host 'node-1') timed out after 800 ms waiting for the "
            + "other participants: 1 of 3 ranks arrived; missing: ranks [0, 2] (rendezvous " + server.address() + ")"), e.getMessage());
        assertTrue(millis >= 800 && millis < 20_000, "failed after " + millis + " ms, not at its 800 ms deadline"); // generous above
        // The failed creation withdrew everything: the key is usable by a complete set of ranks.
        createAll(key, 3, Duration.ofSeconds(20)).forEach(TensorStore::close);
    }

    @Test
    void shouldRefuseBadRequestsBeforeTalkingToTheRendezvous() {
        RendezvousServer own = RendezvousServer.start("127.0.0.1", 0);
        TensorStore store = TensorStore.create(TensorStoreCreateInfo.builder().type(TensorStoreType.NETWORK).storeKey(freshKey())
            .worldSize(1).rendezvous(own.address()).hostId("node-0").timeout(Duration.ofSeconds(2)).build());
        try (Tensor t = TestTensors.full(1f, 4); Tensor sparse = t.to_sparse()) {
            own.close(); // from here, anything that reaches the rendezvous fails with a CommException
            assertThrows(IllegalArgumentException.class, () -> store.srcSet("a", t, CPU, 0));
            assertThrows(IllegalArgumentException.class, () -> store.srcSet("", t, CPU, 1));
            assertThrows(IllegalArgumentException.class, () -> store.srcSet("a", sparse, CPU, 1));
            assertThrows(IllegalArgumentException.class, () -> store.destGet(null, CPU));
            assertThrows(NullPointerException.class, () -> store.destGet("a", null));
            IllegalStateException noGet = assertThrows(IllegalStateException.class, () -> store.destFinishGet("a", CPU));
            assertTrue(noGet.getMessage().contains("no destGet of this key is outstanding"), noGet.getMessage());
            IllegalStateException notLive = assertThrows(IllegalStateException.class, () -> store.srcWaitUntilGetFinished("a", CPU));
            assertTrue(notLive.getMessage().contains("not live"), notLive.getMessage());
            assertThrows(UnsupportedOperationException.class, () -> store.allocate(new long[] {2}, ScalarType.Float));
            if (org.dtorch.core.device.Cuda.isAvailable()) {
                assertThrows(UnsupportedOperationException.class, () -> store.srcSet("a", t, CPU, 1, DeviceKind.CUDA));
            }
            // A good request does reach it, and says where it went.
            CommException down = assertThrows(CommException.class, () -> store.srcSet("a", t, CPU, 1));
            assertTrue(down.getMessage().contains("srcSet('a') on store '" + store.storeKey() + "' (rank 0 on host 'node-0')")
                && down.getMessage().contains(own.address().toString()), down.getMessage());
        } finally {
            store.close();
        }
    }

    @Test
    void shouldListenOnlyOnTheAdvertisedAddressAndOnAGivenPortAgain() throws Exception {
        int port;
        try (RendezvousServer first = RendezvousServer.start("127.0.0.1", 0)) {
            port = first.address().port();
            java.util.Optional<java.net.InetAddress> other = java.net.NetworkInterface.networkInterfaces()
                .flatMap(java.net.NetworkInterface::inetAddresses).filter(a -> !a.isLoopbackAddress() && !a.isLinkLocalAddress()).findFirst();
            if (other.isEmpty()) {
                System.out.println("shouldListenOnlyOnTheAdvertisedAddress: no address but loopback here, the refusal is not checked");
            } else {
                try (java.net.Socket outside = new java.net.Socket()) {
                    assertThrows(java.net.ConnectException.class,
                        () -> outside.connect(new java.net.InetSocketAddress(other.get(), port), 2000));
                }
            }
        }
        // A run's fixed port (MASTER_PORT) is bound again at once after the last server on it stopped.
        try (RendezvousServer again = RendezvousServer.start("127.0.0.1", port);
             TensorStore store = TensorStore.create(TensorStoreCreateInfo.builder().type(TensorStoreType.NETWORK).storeKey(freshKey())
                 .worldSize(1).rendezvous(again.address()).hostId("node-0").timeout(Duration.ofSeconds(5)).build())) {
            assertEquals(port, again.address().port());
            store.barrier();
        }
    }

    @Test
    void shouldRefuseANetworkStoreWithoutRendezvous() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> TensorStoreCreateInfo.builder().type(TensorStoreType.NETWORK).storeKey("k").worldSize(2).build());
        assertTrue(e.getMessage().contains("needs the rendezvous"), e.getMessage());
    }

    @Test
    void shouldPickTheBackendFromWhereTheParticipantsAre() {
        String key = freshKey();
        List<TensorStore> apart = RankThreads.run(2, rank -> TensorStore.createForParticipants(info(key, 2, rank, Duration.ofSeconds(20))
            .toBuilder().type(TensorStoreType.MEMORY).build()));
        try {
            apart.forEach(s -> assertInstanceOf(NetworkTensorStore.class, s, "ranks on two hosts need the Network backend"));
        } finally {
            apart.forEach(TensorStore::close);
        }
        String together = freshKey();
        List<TensorStore> threads = RankThreads.run(2, rank -> TensorStore.createForParticipants(info(together, 2, rank, Duration.ofSeconds(20))
            .toBuilder().hostId("node-same").build()));
        try {
            threads.forEach(s -> assertInstanceOf(MemoryTensorStore.class, s, "threads of one process share memory"));
        } finally {
            threads.forEach(TensorStore::close);
        }
        assertEquals(TensorStoreType.FILE, ParticipantPlaces.backend(List.of("h\t1@a", "h\t2@b"), "h\t1@a"));
        assertEquals(TensorStoreType.NETWORK, ParticipantPlaces.backend(List.of("h\t1@a", "g\t1@a"), "h\t1@a"));
        assertEquals(TensorStoreType.MEMORY, ParticipantPlaces.backend(List.of("h\t1@a", "h\t1@a"), "h\t1@a"));
    }

    private static void await(CountDownLatch latch) {
        try {
            assertTrue(latch.await(20, TimeUnit.SECONDS));
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }
}
