package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.ShmFiles;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The File store's protocol with its participants as threads of this process (the shared-memory path is
 * the same as across processes; {@code FileTensorStoreProcessTest} runs it across JVMs).
 */
class FileTensorStoreTest extends TensorStoreContractTest {
    private final String instance = ShmFiles.freshInstance("fts");
    /** Views are counted per process; other tests' futures may still hold theirs until collected. */
    private final int viewsBefore = ShmTensors.liveViewCount();

    @Override
    TensorStoreCreateInfo info(String key, int world, int rank, Duration timeout) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).storeKey(key).worldSize(world).rank(rank).timeout(timeout)
            .instanceId(instance).build();
    }

    @Override
    int liveKeyCount(TensorStore store) {
        return ((FileTensorStore) store).liveKeyCount();
    }

    private FileTensorStore fileSolo(Duration timeout) {
        return (FileTensorStore) solo(timeout);
    }

    @AfterEach
    void noFilesLeft() {
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }

    @Test
    void shouldExchangeSmallAndLargeValuesBetweenSeveralConsumers() {
        int world = 4;
        List<TensorStore> stores = createAll(freshKey(), world, Duration.ofSeconds(10));
        try {
            List<Double> sums = RankThreads.run(world, rank -> {
                TensorStore store = stores.get(rank);
                // Even ranks send 3 floats (inline in the entry), odd ranks 100000 (a data region).
                long numel = rank % 2 == 0 ? 3 : 100_000;
                try (Tensor mine = TestTensors.full(rank + 1, numel)) {
                    store.srcSet("from/" + rank, mine, CPU, world - 1);
                    double sum = rank + 1;
                    for (int other = 0; other < world; other++) {
                        if (other != rank) {
                            try (Tensor got = store.destGet("from/" + other, CPU)) {
                                sum += got.sum().item_double() / got.numel();
                            }
                            store.destFinishGet("from/" + other, CPU);
                        }
                    }
                    store.srcWaitUntilGetFinished("from/" + rank, CPU);
                    return sum;
                }
            });
            sums.forEach(s -> assertEquals(10.0, s));
            assertEquals(0, ((FileTensorStore) stores.get(0)).liveKeyCount());
        } finally {
            stores.forEach(TensorStore::close);
        }
        assertEquals(viewsBefore, ShmTensors.liveViewCount(), "views of shared memory left alive");
    }

    @Test
    void shouldKeepDtypeShapeAndValuesOfAnyLayout() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(10));
        try (Tensor ints = TestTensors.pattern(new long[] {64, 33}, ScalarType.Long, 0, 1000, -500);
             Tensor transposed = ints.t(); Tensor halves = TestTensors.pattern(new long[] {3, 5, 7}, ScalarType.BFloat16, 1, 50, 0)) {
            RankThreads.runAll(2, rank -> {
                TensorStore store = stores.get(rank);
                if (rank == 0) {
                    store.srcSet("t", transposed, CPU, 1);
                    store.srcSet("h", halves, CPU, 1);
                    store.srcWaitUntilGetFinished("t", CPU);
                    store.srcWaitUntilGetFinished("h", CPU);
                } else {
                    try (Tensor t = store.destGet("t", CPU); Tensor h = store.destGet("h", CPU)) {
                        assertTrue(TestTensors.same(transposed, t), TestTensors.diff(transposed, t));
                        assertTrue(TestTensors.same(halves, h), TestTensors.diff(halves, h));
                        assertNotEquals(transposed.data_ptr().address(), t.data_ptr().address());
                    }
                    store.destFinishGet("t", CPU);
                    store.destFinishGet("h", CPU);
                }
            });
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldPublishAnAllocatedTensorInPlaceSoConsumersWriteThroughIt() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(10));
        try {
            Tensor shared = stores.get(0).allocate(new long[] {4, 1000}, ScalarType.Float);
            shared.zero_();
            RankThreads.runAll(2, rank -> {
                TensorStore store = stores.get(rank);
                if (rank == 0) {
                    store.srcSet("out", shared, CPU, 1);
                    store.srcWaitUntilGetFinished("out", CPU);
                } else {
                    try (Tensor alias = store.destGet("out", CPU)) {
                        alias.fill_(new org.bytedeco.pytorch.Scalar(9f));
                    }
                    store.destFinishGet("out", CPU);
                }
            });
            assertEquals(9f * 4000, shared.sum().item_float(), "the consumer's writes must land in the producer's tensor");
            shared.close();
        } finally {
            stores.forEach(TensorStore::close);
        }
        assertEquals(viewsBefore, ShmTensors.liveViewCount(), "views of shared memory left alive");
    }

    @Test
    void shouldKeepAViewValidAfterTheStoreIsClosed() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(10));
        Tensor kept;
        try (Tensor value = TestTensors.full(4f, 1 << 16)) {
            stores.get(0).srcSet("v", value, CPU, 1);
            kept = stores.get(1).destGet("v", CPU);
            stores.get(1).destFinishGet("v", CPU);
            stores.get(0).srcWaitUntilGetFinished("v", CPU);
        } finally {
            stores.forEach(TensorStore::close);
        }
        assertEquals(viewsBefore + 1, ShmTensors.liveViewCount());
        assertEquals(4f * (1 << 16), kept.sum().item_float());
        kept.close();
        assertEquals(viewsBefore, ShmTensors.liveViewCount(), "views of shared memory left alive");
    }

    @Test
    void shouldBeReusableAfterResetAndAfterAKeyIsDone() {
        List<TensorStore> stores = createAll(freshKey(), 2, Duration.ofSeconds(10));
        try {
            for (int round = 0; round < 5; round++) {
                float value = round;
                RankThreads.runAll(2, rank -> {
                    TensorStore store = stores.get(rank);
                    if (rank == 0) {
                        try (Tensor t = TestTensors.full(value, 5000)) {
                            store.srcSet("k", t, CPU, 1);
                            store.srcWaitUntilGetFinished("k", CPU);
                        }
                    } else {
                        try (Tensor got = store.destGet("k", CPU); Tensor first = got.select(0, 4999)) {
                            assertEquals(value, first.item_float());
                        }
                        store.destFinishGet("k", CPU);
                    }
                });
            }
            try (Tensor t = TestTensors.full(1f, 5000)) {
                stores.get(0).srcSet("left", t, CPU, 1);
                RankThreads.runAll(2, rank -> stores.get(rank).reset());
                assertEquals(0, ((FileTensorStore) stores.get(0)).liveKeyCount());
                stores.get(0).srcSet("left", t, CPU, 1);
            }
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    void shouldRejectWhatAFileStoreCannotCarryBeforeTouchingIt() {
        try (FileTensorStore store = fileSolo(Duration.ofMillis(200)); Tensor t = TestTensors.full(2f, 2);
             Tensor nineDims = TestTensors.full(1f, 1, 1, 1, 1, 1, 1, 1, 1, 1)) {
            IllegalArgumentException longKey = assertThrows(IllegalArgumentException.class, () -> store.srcSet("k".repeat(300), t, CPU, 1));
            assertTrue(longKey.getMessage().contains("at most 252 bytes"), longKey.getMessage());
            IllegalArgumentException dims = assertThrows(IllegalArgumentException.class, () -> store.srcSet("a", nineDims, CPU, 1));
            assertTrue(dims.getMessage().contains("at most 8 dims"), dims.getMessage());
            assertEquals(0, store.liveKeyCount(), "rejected calls must not change the store");
        }
    }

    @Test
    void shouldPickTheBackendWithTheSameProcessCheck() {
        String key = freshKey();
        List<TensorStore> stores = RankThreads.run(3, rank -> TensorStore.createForParticipants(info(key, 3, rank, Duration.ofSeconds(10))));
        try {
            stores.forEach(s -> assertInstanceOf(MemoryTensorStore.class, s, "threads of one process share memory"));
        } finally {
            stores.forEach(TensorStore::close);
        }
    }

    @Test
    @Timeout(120)
    void shouldStayBoundedOverManyExchanges() {
        int world = 3;
        int rounds = 2_000;
        List<TensorStore> stores = createAll(freshKey(), world, Duration.ofSeconds(30));
        try {
            RankThreads.run(world, Duration.ofSeconds(100), rank -> {
                TensorStore store = stores.get(rank);
                int next = (rank + 1) % world;
                int previous = (rank + world - 1) % world;
                try (Tensor small = TestTensors.full(rank, 16); Tensor large = TestTensors.full(rank, 4096)) {
                    for (int i = 0; i < rounds; i++) {
                        String out = rank + "->" + next;
                        store.srcSet(out, i % 2 == 0 ? small : large, CPU, 1);
                        try (Tensor got = store.destGet(previous + "->" + rank, CPU); Tensor first = got.select(0, 0)) {
                            if (first.item_float() != previous) {
                                throw new AssertionError("rank " + rank + " got a wrong value in exchange " + i);
                            }
                        }
                        store.destFinishGet(previous + "->" + rank, CPU);
                        store.srcWaitUntilGetFinished(out, CPU);
                    }
                }
                return null;
            });
            assertEquals(0, ((FileTensorStore) stores.get(0)).liveKeyCount());
            assertTrue(ShmFiles.of(instance).size() <= 1 + world * 4, "data regions pile up: " + ShmFiles.of(instance));
        } finally {
            stores.forEach(TensorStore::close);
        }
        assertEquals(viewsBefore, ShmTensors.liveViewCount(), "views of shared memory left alive");
    }
}
