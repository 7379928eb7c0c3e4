package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.OnThread;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Network store between JVMs on 127.0.0.1, each a host of its own ({@code -Ddtorch.host.id=node-<rank>}), so that
 * the participant check picks the Network backend and nothing goes through shared memory: this JVM is rank 0 and
 * serves the rendezvous, child JVMs ({@link NetworkStoreChild}) are the others.
 */
@Tag("multinode")
@Timeout(180)
class NetworkTensorStoreProcessTest {
    private static final AtomicInteger KEYS = new AtomicInteger();
    private static final Duration STARTUP = Duration.ofSeconds(90);

    private RendezvousServer server;

    @BeforeEach
    void startRendezvous() {
        server = RendezvousServer.start("127.0.0.1", 0);
    }

    @AfterEach
    void stopRendezvous() {
        server.close();
    }

    private TensorStoreCreateInfo info(String key, int world, Duration timeout) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.MEMORY).rendezvous(server.address()).hostId("node-0").storeKey(key)
            .worldSize(world).rank(0).timeout(timeout).build();
    }

    private ChildJvm child(String scenario, String key, int world, int rank, Duration timeout) {
        return ChildJvm.start("rank " + rank, NetworkStoreChild.class, Map.of(HostIdentity.HOST_ID_PROPERTY, "node-" + rank), scenario,
            server.address().toString(), key, String.valueOf(world), String.valueOf(rank), String.valueOf(timeout.toMillis()));
    }

    @Test
    void shouldHandOneValueToTwoOtherJvmsWaitForBothFinishesThenResetAndMeet() throws Exception {
        String key = "weights-" + KEYS.incrementAndGet();
        List<ChildJvm> children = new ArrayList<>();
        try (Tensor weights = NetworkStoreChild.weights(); Tensor ids = NetworkStoreChild.ids()) {
            children.add(child("consume", key, 3, 1, STARTUP));
            children.add(child("consume", key, 3, 2, STARTUP));
            try (TensorStore store = TensorStore.createForParticipants(info(key, 3, STARTUP))) {
                assertInstanceOf(NetworkTensorStore.class, store, "participants on three hosts need the Network backend");
                store.srcSet("weights", weights, StoreChild.CPU, 2);
                store.srcSet("ids", ids, StoreChild.CPU, 2);
                OnThread<Void> waited = OnThread.start("src-waiter", () -> {
                    store.srcWaitUntilGetFinished("ids", StoreChild.CPU);
                    store.srcWaitUntilGetFinished("weights", StoreChild.CPU);
                    return null;
                });
                ChildJvm first = children.get(0);
                ChildJvm second = children.get(1);
                assertEquals("TOOK exact", first.awaitLine("TOOK", STARTUP));
                assertEquals("TOOK exact", second.awaitLine("TOOK", STARTUP));
                first.awaitLine("FINISHED", STARTUP);
                second.awaitLine("HOLDING", STARTUP);
                Await.asleep(waited.thread()); // waiting for rank 2's finish
                assertFalse(waited.result().isDone(), "srcWaitUntilGetFinished returned while rank 2 still held its take");
                second.send("FINISH");
                waited.result().get(60, TimeUnit.SECONDS);
                second.awaitLine("FINISHING", Duration.ofSeconds(10));
                assertEquals(0, ((NetworkTensorStore) store).liveKeyCount());

                store.reset();
                StoreChild.ring(store);
                store.barrier();
            }
            for (ChildJvm c : children) {
                assertEquals("BACKEND NetworkTensorStore", c.awaitLine("BACKEND", STARTUP));
                c.awaitSuccess(STARTUP);
            }
        } finally {
            children.forEach(ChildJvm::close);
        }
    }

    @Test
    void shouldNameTheKeyRankAndHostWhenNoPeerSetsAKey() {
        String key = "never-" + KEYS.incrementAndGet();
        try (ChildJvm other = child("never-set", key, 2, 1, Duration.ofSeconds(3))) {
            try (TensorStore store = TensorStore.create(info(key, 2, STARTUP).toBuilder().type(TensorStoreType.NETWORK).build())) {
                String line = other.awaitLine("TIMEOUT", STARTUP);
                assertTrue(line.startsWith("TIMEOUT destGet('never') on store '" + key + "' (rank 1 on host 'node-1') timed out after 3 s: "
                    + "no producer set this key"), line);
                assertTrue(line.contains("rendezvous " + server.address()), line);
                store.barrier(); // the other JVM's store stayed usable after its timeout
            }
            other.awaitSuccess(STARTUP);
        }
    }

    @Test
    void shouldFailAtTheDeadlineNamingTheMissingRank() {
        String key = "missing-" + KEYS.incrementAndGet();
        Duration timeout = Duration.ofSeconds(2);
        try (ChildJvm other = child("join-missing", key, 3, 1, timeout)) {
            other.awaitLine("STARTING", STARTUP);
            long start = System.nanoTime();
            CommTimeoutException e = assertThrows(CommTimeoutException.class,
                () -> TensorStore.create(info(key, 3, timeout).toBuilder().type(TensorStoreType.NETWORK).build()));
            long millis = (System.nanoTime() - start) / 1_000_000;
            assertTrue(e.getMessage().startsWith("creating store '" + key + "' (rank 0 on host 'node-0') timed out after 2 s waiting for the "
                + "other participants: "), e.getMessage());
            assertTrue(e.getMessage().contains("missing: ranks [") && e.getMessage().contains("2]"), e.getMessage());
            assertTrue(millis >= 2_000 && millis < 30_000, "failed after " + millis + " ms, not at its 2 s deadline"); // generous above
            String line = other.awaitLine("FAILED", STARTUP);
            assertTrue(line.contains("(rank 1 on host 'node-1') timed out after 2 s") && line.contains("2]"), line);
            other.awaitSuccess(STARTUP);
        }
    }
}
