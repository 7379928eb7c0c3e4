package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.CudaUnavailableException;
import org.dtorch.core.device.Device;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class MemoryTensorStoreTest extends TensorStoreContractTest {

    @Override
    TensorStoreCreateInfo info(String key, int world, int rank, Duration timeout) {
        return TensorStoreCreateInfo.builder().storeKey(key).worldSize(world).rank(rank).timeout(timeout).build();
    }

    @Override
    int liveKeyCount(TensorStore store) {
        return ((MemoryTensorStore) store).liveKeyCount();
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
    void shouldValidateTheCreateInfo() {
        IllegalArgumentException net = assertThrows(IllegalArgumentException.class,
            () -> TensorStore.create(TensorStoreCreateInfo.builder().type(TensorStoreType.NETWORK).storeKey("n").worldSize(1).build()));
        assertTrue(net.getMessage().contains("a Network store needs the rendezvous"), net.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TensorStoreCreateInfo.builder().storeKey("x").worldSize(2).rank(2).build());
        assertThrows(IllegalArgumentException.class, () -> TensorStoreCreateInfo.builder().storeKey(" ").worldSize(1).build());
    }

    @Test
    void shouldMoveToTheTargetCpuDeviceWithoutCopying() {
        try (TensorStore store = solo(Duration.ofSeconds(1)); Tensor t = TestTensors.full(5f, 3)) {
            if (!Cuda.isAvailable()) {
                assertThrows(CudaUnavailableException.class, () -> store.destGetAndToDevice("k", CPU, Device.cuda(0)));
            }
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
