package org.dtorch.core.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
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
        for (int round = 0; round < 20; round++) {
            int value = round;
            Thread producer = Thread.ofPlatform().start(() -> {
                try {
                    Thread.sleep(2); // past the consumer's spins and yields: it parks
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                queue.offer(value);
            });
            long start = System.nanoTime();
            List<Integer> batch = queue.take();
            long waited = System.nanoTime() - start;
            assertEquals(List.of(value), batch);
            assertTrue(waited < TimeUnit.MILLISECONDS.toNanos(90), "a parked consumer waited " + waited / 1_000_000 + " ms: the wake-up was lost");
            producer.join();
        }
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
