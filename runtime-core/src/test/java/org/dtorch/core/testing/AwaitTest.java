package org.dtorch.core.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The waits that stand in for sleeps in tests: each returns once its condition holds and fails, saying what, at its deadline. */
@Timeout(60)
class AwaitTest {

    @Test
    void shouldReturnOnceTheConditionHoldsAndNameItAtTheDeadline() {
        AtomicInteger polls = new AtomicInteger();
        Await.until(() -> polls.incrementAndGet() >= 3, Duration.ofSeconds(10), "the third poll");
        assertEquals(3, polls.get());
        AssertionError e = assertThrows(AssertionError.class, () -> Await.until(() -> false, Duration.ofMillis(50), "pigs fly"));
        assertEquals("timed out after PT0.05S waiting until pigs fly", e.getMessage());
        AssertionError late = assertThrows(AssertionError.class,
            () -> Await.until(() -> false, Duration.ofMillis(50), () -> "a description made at the deadline"));
        assertTrue(late.getMessage().endsWith("waiting until a description made at the deadline"), late.getMessage());
    }

    @Test
    void shouldSeeAThreadParkedOnALatchAndFailWhenItEndsInstead() throws InterruptedException {
        CountDownLatch release = new CountDownLatch(1);
        Thread waiter = Thread.ofPlatform().name("latch-waiter").start(() -> {
            try {
                release.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        Await.parked(waiter, Duration.ofSeconds(10));
        assertTrue(waiter.getState() == Thread.State.TIMED_WAITING, waiter.getState().toString());
        release.countDown();
        waiter.join(10_000);
        Thread quick = Thread.ofPlatform().start(() -> { });
        quick.join(10_000);
        AssertionError e = assertThrows(AssertionError.class, () -> Await.parked(quick, Duration.ofSeconds(10)));
        assertTrue(e.getMessage().contains("ended while the test waited"), e.getMessage());
    }

    /** A blocking read of a pipe sleeps in the kernel while Java calls the thread RUNNABLE: parked misses it, asleep sees it. */
    @Test
    void shouldSeeAThreadAsleepInNativeCode() throws Exception {
        ProcessBuilder silent = new ProcessBuilder("sleep", "30");
        Process child = silent.start();
        try (InputStream out = child.getInputStream()) {
            Thread reader = Thread.ofPlatform().name("pipe-reader").start(() -> {
                try {
                    out.read();
                } catch (IOException closed) {
                    // the test closed the pipe
                }
            });
            Await.asleep(reader, Duration.ofSeconds(10));
            assertEquals(Thread.State.RUNNABLE, reader.getState(), "a read in native code is RUNNABLE to Java");
            AssertionError e = assertThrows(AssertionError.class, () -> Await.parked(reader, Duration.ofMillis(100)));
            assertTrue(e.getMessage().contains("pipe-reader waits (it is RUNNABLE)"), e.getMessage());
            child.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            reader.join(10_000);
        } finally {
            child.destroyForcibly();
        }
    }

    @Test
    void shouldNotTakeABusyThreadForASleepingOne() throws InterruptedException {
        Thread spinner = Thread.ofPlatform().name("spinner").start(() -> {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (System.nanoTime() < end) {
                Thread.onSpinWait();
            }
            LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(30));
        });
        AssertionError e = assertThrows(AssertionError.class, () -> Await.asleep(spinner, Duration.ofMillis(300)));
        assertTrue(e.getMessage().contains("spinner"), e.getMessage());
        Await.asleep(spinner, Duration.ofSeconds(30)); // once it parks
        LockSupport.unpark(spinner);
        spinner.join(10_000);
    }

    /** A Java pipe's reader waits in Java, not in the kernel: parked sees it. */
    @Test
    void shouldSeeAJavaPipeReaderParked() throws Exception {
        try (PipedOutputStream writer = new PipedOutputStream(); PipedInputStream pipe = new PipedInputStream(writer)) {
            Thread reader = Thread.ofPlatform().name("java-pipe-reader").start(() -> {
                try {
                    pipe.read();
                } catch (IOException closed) {
                    // the test closed the pipe
                }
            });
            Await.parked(reader, Duration.ofSeconds(10));
            writer.write(1);
            writer.flush();
            reader.join(10_000);
        }
    }
}
