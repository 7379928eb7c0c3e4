package org.dtorch.core.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The polled host wait behind CUDA synchronize calls, with real threads (the CUDA side is a gpu test). */
@Timeout(30)
class DeviceWaitTest {

    @Test
    void shouldReturnOnceAnotherThreadFinishesTheWorkPastTheSpinPhase() throws Exception {
        AtomicBoolean done = new AtomicBoolean();
        Thread waiter = Thread.currentThread();
        Thread finisher = Thread.ofPlatform().start(() -> {
            Await.parked(waiter, Duration.ofSeconds(10)); // past the spin phase: the waiter parks between queries
            done.set(true);
        });
        // Returning at all is the check: at its 10 s deadline the wait would throw instead.
        DeviceWait.until(done::get, Duration.ofSeconds(10), () -> "work");
        assertTrue(done.get());
        finisher.join();
    }

    @Test
    void shouldNotQueryAgainWhenTheWorkIsAlreadyDone() {
        AtomicInteger queries = new AtomicInteger();
        DeviceWait.until(() -> queries.incrementAndGet() > 0, Duration.ofMillis(1), () -> "work");
        assertEquals(1, queries.get());
    }

    @Test
    void shouldNameWhatItWaitedForAndForHowLongAtTheDeadline() {
        long start = System.nanoTime();
        DeviceTimeoutException e = assertThrows(DeviceTimeoutException.class,
            () -> DeviceWait.until(() -> false, Duration.ofMillis(200), () -> "synchronize of stream(cuda:0, 3)"));
        assertEquals("synchronize of stream(cuda:0, 3): did not finish within 200 ms", e.getMessage());
        assertTrue(System.nanoTime() - start >= 200_000_000L);
    }

    @Test
    void shouldStopWaitingWhenInterruptedAndKeepTheFlag() throws Exception {
        Thread waiter = Thread.currentThread();
        Thread interrupter = Thread.ofPlatform().start(() -> {
            Await.parked(waiter, Duration.ofSeconds(10)); // past the spin phase: the waiter parks between queries
            waiter.interrupt();
        });
        IllegalStateException e = assertThrows(IllegalStateException.class,
            () -> DeviceWait.until(() -> false, Duration.ofSeconds(10), () -> "synchronize of event(cuda:0)"));
        assertTrue(e.getMessage().contains("synchronize of event(cuda:0): interrupted"), e.getMessage());
        assertTrue(Thread.interrupted(), "the interrupt flag stays set");
        interrupter.join();
    }

    @Test
    void shouldReadTheDefaultDeadlineAndRefuseABadOne() {
        String before = System.getProperty(DeviceWait.TIMEOUT_PROPERTY);
        try {
            System.clearProperty(DeviceWait.TIMEOUT_PROPERTY);
            assertEquals(Duration.ofSeconds(300), DeviceWait.defaultTimeout());
            System.setProperty(DeviceWait.TIMEOUT_PROPERTY, "7");
            assertEquals(Duration.ofSeconds(7), DeviceWait.defaultTimeout());
            System.setProperty(DeviceWait.TIMEOUT_PROPERTY, "soon");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, DeviceWait::defaultTimeout);
            assertTrue(e.getMessage().contains("dtorch.device.syncTimeoutSeconds") && e.getMessage().contains("'soon'"), e.getMessage());
            System.setProperty(DeviceWait.TIMEOUT_PROPERTY, "0");
            assertThrows(IllegalArgumentException.class, DeviceWait::defaultTimeout);
        } finally {
            if (before == null) {
                System.clearProperty(DeviceWait.TIMEOUT_PROPERTY);
            } else {
                System.setProperty(DeviceWait.TIMEOUT_PROPERTY, before);
            }
        }
    }
}
