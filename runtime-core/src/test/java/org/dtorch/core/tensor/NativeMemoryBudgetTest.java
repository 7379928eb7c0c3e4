package org.dtorch.core.tensor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.Cleaner;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.Await;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class NativeMemoryBudgetTest {
    /** Collections the budgets under test ran. */
    private final AtomicInteger collections = new AtomicInteger();

    private NativeMemoryBudget budget(long bytes) {
        return new NativeMemoryBudget(bytes, collections::incrementAndGet);
    }

    @Test
    void shouldRequestACollectionWhenDroppedBytesCrossTheBudget() {
        NativeMemoryBudget budget = budget(100);
        budget.charge(60);
        assertEquals(0, budget.collectionsRequested(), "60 of 100 bytes");
        budget.charge(60);
        assertEquals(1, budget.collectionsRequested(), "120 of 100 bytes");
        assertEquals(1, collections.get(), "the charging thread runs the collection");
        budget.charge(10);
        assertEquals(1, budget.collectionsRequested(), "one request per budget's worth of charges, not one per charge");
        budget.release(130); // the collection found all of it
        budget.charge(100);
        assertEquals(1, budget.collectionsRequested(), "100 of 100 bytes");
        budget.charge(30);
        assertEquals(2, budget.collectionsRequested(), "130 of 100 bytes, and 140 charged since the last request (which saw 120)");
        assertEquals(2, collections.get());
        assertEquals(130, budget.outstandingBytes());
    }

    /** GPU tensors charge a budget of their own, of its own size; every other kind the JVM's. */
    @Test
    void shouldKeepTheGpusBudgetApart() {
        assertSame(NativeMemoryBudget.global(), NativeMemoryBudget.of(DeviceKind.CPU));
        NativeMemoryBudget gpus = NativeMemoryBudget.of(DeviceKind.CUDA);
        assertNotSame(NativeMemoryBudget.global(), gpus);
        assertEquals(Long.getLong(NativeMemoryBudget.CUDA_BUDGET_PROPERTY, NativeMemoryBudget.DEFAULT_CUDA_BUDGET_MIB) << 20, gpus.budgetBytes());
        long before = gpus.outstandingBytes();
        Object owner = new Object();
        Cleaner.Cleanable charged = gpus.register(owner, 1 << 20, () -> { });
        assertEquals(before + (1 << 20), gpus.outstandingBytes(), "charged to the GPUs' budget");
        charged.clean();
        assertEquals(before, gpus.outstandingBytes());
    }

    @Test
    void shouldNeverRequestOneWhenOwnersAreClosed() {
        NativeMemoryBudget budget = budget(100);
        for (int i = 0; i < 10_000; i++) {
            budget.register(new Object(), 60, () -> { }).clean();
        }
        assertEquals(0, budget.collectionsRequested());
        assertEquals(0, budget.outstandingBytes());
    }

    @Test
    void shouldSpaceRequestsByWhatIsHeldWhenThatExceedsTheBudget() {
        NativeMemoryBudget budget = budget(100);
        budget.charge(1000);
        assertEquals(1, budget.collectionsRequested());
        budget.charge(900);
        assertEquals(1, budget.collectionsRequested(), "1000 bytes were outstanding at the last request: wait for as many new ones");
        budget.charge(200);
        assertEquals(2, budget.collectionsRequested());
    }

    @Test
    void shouldNotSpaceRequestsByMemoryTheLastCollectionGaveBack() {
        NativeMemoryBudget budget = budget(100);
        budget.charge(1000);
        assertEquals(1, budget.collectionsRequested());
        budget.release(950); // the collection's Cleaners freed what the program had dropped: 50 bytes are held
        budget.charge(90);
        assertEquals(1, budget.collectionsRequested(), "within the budget again");
        budget.charge(20);
        assertEquals(2, budget.collectionsRequested(), "110 bytes since the last request, over the budget of 100: not 1000 more");
    }

    @Test
    void shouldNotRequestWhenTheBudgetIsZero() {
        NativeMemoryBudget budget = budget(0);
        budget.charge(1L << 40);
        assertEquals(0, budget.collectionsRequested());
        assertEquals(1L << 40, budget.outstandingBytes());
    }

    @Test
    void shouldRunTheReleaseAndCreditTheBytesOnceWhenTheCollectorFindsADroppedOwner() {
        NativeMemoryBudget budget = budget(1L << 30);
        AtomicInteger released = new AtomicInteger();
        budget.register(new byte[16], 1 << 20, released::incrementAndGet);
        assertEquals(1 << 20, budget.outstandingBytes());
        Await.until(() -> {
            System.gc();
            return budget.outstandingBytes() == 0;
        }, Duration.ofSeconds(30), "the dropped owner's bytes are credited back after a collection");
        assertEquals(1, released.get());
    }

    @Test
    void shouldCleanOnceAndCreditOnceWhenClosedTwice() {
        NativeMemoryBudget budget = budget(100);
        AtomicInteger released = new AtomicInteger();
        var cleanable = budget.register(new Object(), 40, released::incrementAndGet);
        cleanable.clean();
        cleanable.clean();
        assertEquals(1, released.get());
        assertEquals(0, budget.outstandingBytes());
    }

    @Test
    void shouldRejectNegativeSizes() {
        IllegalArgumentException charge = assertThrows(IllegalArgumentException.class, () -> budget(100).charge(-1));
        assertTrue(charge.getMessage().contains("-1"), charge.getMessage());
        IllegalArgumentException size = assertThrows(IllegalArgumentException.class, () -> budget(-1 << 20));
        assertTrue(size.getMessage().contains(NativeMemoryBudget.BUDGET_PROPERTY), size.getMessage());
    }
}
