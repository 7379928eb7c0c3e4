package org.dtorch.core.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class WorkQueueTest {

    @Test
    @Timeout(30)
    void shouldHandEveryItemOverOnceInEachProducersOrder() throws InterruptedException {
        WorkQueue<long[]> queue = new WorkQueue<>();
        int producers = 3;
        int perProducer = 200_000;
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < producers; p++) {
            int producer = p;
            threads.add(Thread.ofPlatform().start(() -> {
                for (int i = 0; i < perProducer; i++) {
                    queue.offer(new long[] {producer, i});
                }
            }));
        }
        long[] next = new long[producers];
        int received = 0;
        int batches = 0;
        while (received < producers * perProducer) {
            List<long[]> batch = queue.take(TimeUnit.SECONDS.toNanos(10));
            assertTrue(!batch.isEmpty(), "nothing arrived within 10 s after " + received + " items");
            batches++;
            for (long[] item : batch) {
                int producer = (int) item[0];
                assertEquals(next[producer], item[1], "producer " + producer + "'s items out of order");
                next[producer]++;
                received++;
            }
        }
        for (Thread t : threads) {
            t.join();
        }
        assertTrue(queue.poll().isEmpty());
        assertTrue(batches < received, "items should arrive in batches, got " + batches + " batches for " + received);
    }

    @Test
    @Timeout(30)
    void shouldWakeAParkedConsumerWithoutWaitingOutItsParkSlice() throws InterruptedException {
        WorkQueue<Integer> queue = new WorkQueue<>();
        Thread consumer = Thread.currentThread();
        List<Long> waits = new ArrayList<>();
        for (int round = 0; round < 20; round++) {
            int value = round;
            Thread producer = Thread.ofPlatform().start(() -> {
                Await.parked(consumer, Duration.ofSeconds(10)); // past its spins and yields: the consumer parks
                queue.offer(value);
            });
            long start = System.nanoTime();
            List<Integer> batch = queue.take();
            waits.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
            assertEquals(List.of(value), batch);
            producer.join();
        }
        // A lost wake-up leaves the consumer parked for its whole 100 ms slice in every round; a prompt one takes a
        // millisecond or so. The median, so that a round the machine's load delayed does not decide.
        List<Long> sorted = waits.stream().sorted().toList();
        assertTrue(sorted.get(sorted.size() / 2) < 90, "a parked consumer waited " + waits + " ms: the wake-up was lost");
    }

    @Test
    @Timeout(30)
    void shouldReturnAnEmptyBatchAtTheDeadline() {
        WorkQueue<Integer> queue = new WorkQueue<>();
        long start = System.nanoTime();
        assertTrue(queue.take(TimeUnit.MILLISECONDS.toNanos(5)).isEmpty());
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(5));
    }
}
