package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The File store across real JVM processes: this JVM is one participant, child JVMs are the others. */
@Tag("multiprocess")
@Timeout(120)
class FileTensorStoreProcessTest {
    private static final AtomicInteger KEYS = new AtomicInteger();
    private static final Duration STARTUP = Duration.ofSeconds(60);

    private final String instance = ShmFiles.freshInstance("ftsp");
    private final int viewsBefore = ShmTensors.liveViewCount();

    private TensorStoreCreateInfo info(String key, int world, int rank) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).storeKey(key).worldSize(world).rank(rank)
            .timeout(Duration.ofSeconds(60)).instanceId(instance).build();
    }

    private ChildJvm child(String scenario, String key, int world, int rank) {
        return ChildJvm.start("rank " + rank, StoreChild.class, Map.of(), scenario, instance, key, String.valueOf(world), String.valueOf(rank));
    }

    @Test
    void shouldExchangeBetweenThreeProcessesAndPickTheFileBackend() {
        String key = "ring-" + KEYS.incrementAndGet();
        List<ChildJvm> children = new ArrayList<>();
        try {
            children.add(child("ring", key, 3, 1));
            children.add(child("ring", key, 3, 2));
            try (TensorStore store = TensorStore.createForParticipants(info(key, 3, 0))) {
                assertInstanceOf(FileTensorStore.class, store, "participants in several processes need the File backend");
                StoreChild.ring(store);
                store.reset();
            }
            for (ChildJvm c : children) {
                assertEquals("BACKEND FileTensorStore", c.awaitLine("BACKEND", STARTUP));
                c.awaitSuccess(STARTUP);
            }
        } finally {
            children.forEach(ChildJvm::close);
        }
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }

    @Test
    void shouldFailFastWhenTheProducerIsKilledInsideSrcWait() {
        String key = "killed-producer-" + KEYS.incrementAndGet();
        try (ChildJvm producer = child("produce-and-wait", key, 2, 0)) {
            TensorStore store = TensorStore.create(info(key, 2, 1));
            Tensor view;
            try {
                producer.awaitLine("SET", STARTUP);
                view = store.destGet("held", StoreChild.CPU);
                store.destFinishGet("held", StoreChild.CPU);
                producer.kill9();
                long start = System.nanoTime();
                CommException e = assertThrows(CommException.class, store::barrier);
                long millis = (System.nanoTime() - start) / 1_000_000;
                assertTrue(e.getMessage().contains("participant rank 0 (pid " + producer.pid() + ") exited without closing"), e.getMessage());
                // A quarter of the store's 60 s deadline: the death must be noticed, not waited out.
                assertTrue(millis < 15_000, "noticing the dead producer took " + millis + " ms");
                // The value the consumer took stays readable: its mapping outlives the producer.
                assertEquals(6.0 * (1 << 18), view.sum().item_double());
            } finally {
                store.close();
            }
            view.close();
        }
        assertEquals(viewsBefore, ShmTensors.liveViewCount(), "views of shared memory left alive");
        assertEquals(List.of(), ShmFiles.of(instance), "the last live participant must remove everything");
    }

    @Test
    void shouldFailTheProducersWaitWhenAConsumerIsKilled() throws Exception {
        String key = "killed-consumer-" + KEYS.incrementAndGet();
        try (ChildJvm consumer = child("consume-and-hang", key, 2, 1); Tensor value = org.dtorch.core.testing.TestTensors.full(2f, 1 << 18)) {
            TensorStore store = TensorStore.create(info(key, 2, 0));
            try {
                store.srcSet("held", value, StoreChild.CPU, 1);
                Thread killer = Thread.ofPlatform().start(() -> {
                    consumer.awaitLine("TOOK", STARTUP);
                    consumer.kill9();
                });
                CommException e = assertThrows(CommException.class, () -> store.srcWaitUntilGetFinished("held", StoreChild.CPU));
                assertTrue(e.getMessage().contains("participant rank 1 (pid " + consumer.pid() + ") exited without closing"), e.getMessage());
                assertTrue(e.getMessage().contains("0 of 1 consumers finished (1 took the tensor)"), e.getMessage());
                killer.join(10_000);
            } finally {
                store.close();
            }
        }
        assertEquals(List.of(), ShmFiles.of(instance));
    }
}
