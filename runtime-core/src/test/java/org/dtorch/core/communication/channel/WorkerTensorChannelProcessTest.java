package org.dtorch.core.communication.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.ShmFiles;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The channel across real JVM processes: this JVM creates the channel and produces, a child JVM consumes. */
@Tag("multiprocess")
@Timeout(120)
class WorkerTensorChannelProcessTest {
    private static final Duration STARTUP = Duration.ofSeconds(60);

    private final String instance = ShmFiles.freshInstance("wtcp");

    private static ChildJvm consumer(String scenario, ChannelOptions o, int rank, int n) {
        return ChildJvm.start("consumer " + rank, ChannelChild.class, Map.of(), scenario, o.instanceId(), o.name(),
            String.valueOf(o.consumerWorldSize()), String.valueOf(rank), String.valueOf(n));
    }

    private static void publish(ChannelProducer p, int sequence) {
        try (Tensor t = ChannelChild.payload(sequence)) {
            p.enqueue(p.publish(t));
        }
    }

    /**
     * Rank 0, a thread of this JVM, takes every ref; rank 1, a child JVM, takes the first {@code n}, stays attached
     * and is killed. The producer keeps going while rank 1's ACKs are in (two slots: refs n + 1 and n + 2 need ACKs
     * up to n), and its next wait names rank 1 as exited, well before the deadline.
     */
    @Test
    void shouldCollectAcksFromAConsumerProcessAndNameItKilledMidTransfer() {
        ChannelOptions o = ChannelOptions.of(instance, "procs", 2).withTimeout(Duration.ofSeconds(60));
        int n = 100;
        try (WorkerTensorChannel channel = WorkerTensorChannel.create(o);
             ChildJvm killed = consumer("consume-and-hang", o, 1, n);
             ChannelProducer p = WorkerTensorChannel.producer(o)) {
            CompletableFuture<Void> survivor = CompletableFuture.runAsync(() -> {
                try (ChannelConsumer c = WorkerTensorChannel.consumer(o, 0)) {
                    for (int i = 1; i <= n + 2; i++) {
                        try (Tensor expected = ChannelChild.payload(i); Tensor got = (Tensor) c.resolve(c.receive())) {
                            assertTrue(TestTensors.same(expected, got), () -> TestTensors.diff(expected, got));
                        }
                    }
                }
            });
            for (int i = 1; i <= n; i++) {
                publish(p, i);
            }
            killed.awaitLine("RESOLVED", STARTUP);
            killed.kill9();
            publish(p, n + 1);
            publish(p, n + 2);
            survivor.orTimeout(60, TimeUnit.SECONDS).join();
            long start = System.nanoTime();
            try (Tensor t = ChannelChild.payload(n + 3)) {
                CommException e = assertThrows(CommException.class, () -> p.publish(t));
                long millis = (System.nanoTime() - start) / 1_000_000;
                assertTrue(e.getMessage().contains("consumer rank 1 (pid " + killed.pid() + ") exited without closing")
                    && e.getMessage().contains("generation " + (n + 1)) && e.getMessage().contains("ranks missing [1], seen [0]"),
                    e.getMessage());
                // Generous, yet far from the 60 s deadline: the death must be noticed, not waited out.
                assertTrue(millis < 30_000, "noticing the dead consumer took " + millis + " ms against a 60 s deadline");
            }
        }
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }
}
