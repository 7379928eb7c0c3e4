package org.dtorch.core.runtime;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The device loop's fatal stop: it ends the loop, and the interrupt that woke the loop does not outlive it. */
@Timeout(60)
class DeviceLoopTest {

    @Test
    void shouldReturnTheFatalErrorWithTheInterruptCleared() throws Exception {
        try (FailureRegistry failures = FailureRegistry.inMemory();
             ThreadGroupManager groups = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(30))) {
            DeviceLoop loop = new DeviceLoop(Device.cpu(0), Device.cpu(0), failures, groups, Duration.ofSeconds(30), MemoryWatch.OFF);
            CountDownLatch busy = new CountDownLatch(1);
            AtomicBoolean interruptedWhileBusy = new AtomicBoolean();
            AtomicBoolean ranAfter = new AtomicBoolean();
            // The stop comes while the loop runs a task, not while it waits: the cancel's interrupt lands on a busy thread
            // (the case the worker met), and nothing consumes it before the loop returns.
            loop.submitTask(() -> {
                busy.countDown();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (!Thread.currentThread().isInterrupted() && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
                interruptedWhileBusy.set(Thread.currentThread().isInterrupted());
            });
            IllegalStateException error = new IllegalStateException("a malformed message");
            Thread stopper = Thread.ofPlatform().start(() -> {
                try {
                    busy.await();
                } catch (InterruptedException e) {
                    return;
                }
                loop.stopWith(error);
                loop.submitTask(() -> ranAfter.set(true));
            });
            RuntimeException returned = loop.run(op -> { });
            stopper.join();
            assertSame(error, returned, "run returns the fatal error");
            assertTrue(interruptedWhileBusy.get(), "the stop interrupted the busy loop (the case under test)");
            assertFalse(Thread.currentThread().isInterrupted(), "the loop's interrupt is cleared when it returns");
            assertFalse(ranAfter.get(), "nothing queued after the fatal stop ran");
        }
    }
}
