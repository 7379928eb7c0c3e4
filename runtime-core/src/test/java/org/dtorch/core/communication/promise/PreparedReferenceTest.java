package org.dtorch.core.communication.promise;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The handles a getter makes before it sleeps: who fills them, who owns them, who closes what nobody used. */
@Timeout(30)
class PreparedReferenceTest {

    @Test
    void shouldFillThePreparedResultHandleWithANewReference() {
        try (Tensor value = TestTensors.full(2f, 3); PreparedReference prepared = new PreparedReference()) {
            prepared.beforeSleep();
            Tensor result = prepared.referenceTo(value);
            prepared.close();
            try (result) {
                assertTrue(result.defined(), "the returned handle is the caller's; close() leaves it open");
                assertEquals(value.data_ptr().address(), result.data_ptr().address(), "a reference, not a copy");
                assertEquals(2L, value.use_count(), "one more reference to the value");
            }
            assertEquals(1L, value.use_count());
        }
    }

    @Test
    void shouldMakeANewReferenceWhenNothingWasPrepared() {
        try (Tensor value = TestTensors.full(2f, 3); PreparedReference prepared = new PreparedReference();
             Tensor result = prepared.referenceTo(value)) {
            assertEquals(value.data_ptr().address(), result.data_ptr().address());
        }
    }

    @Test
    void shouldLendTheCompleterASpareItKeepsOnceTaken() {
        AtomicReference<Tensor> slot = new AtomicReference<>();
        try (Tensor value = TestTensors.full(5f, 4)) {
            PreparedReference prepared = new PreparedReference(slot);
            prepared.beforeSleep();
            Tensor spare = slot.get();
            assertNotNull(spare, "a getter about to sleep lends a spare");
            Tensor own = PreparedReference.takeSpareFor(slot, value);
            assertSame(spare, own, "the completer fills the spare instead of making a handle");
            assertNull(slot.get());
            prepared.close();
            try (own) {
                assertTrue(own.defined(), "the completer owns the spare it took: the getter's close() leaves it");
                assertEquals(value.data_ptr().address(), own.data_ptr().address());
            }
        }
    }

    @Test
    void shouldCloseTheHandlesNobodyUsed() {
        AtomicReference<Tensor> slot = new AtomicReference<>();
        PreparedReference prepared = new PreparedReference(slot);
        prepared.beforeSleep();
        Tensor spare = slot.get();
        prepared.close();
        assertNull(slot.get(), "a spare the completer never took goes back");
        assertTrue(spare.isNull(), "and is closed");
        try (Tensor value = TestTensors.full(1f, 1); Tensor own = PreparedReference.takeSpareFor(slot, value)) {
            assertNotSame(spare, own, "a completer without a spare makes its own handle");
            assertEquals(value.data_ptr().address(), own.data_ptr().address());
        }
    }

    @Test
    void shouldLendOneSpareWhateverTheNumberOfSleepingGetters() {
        AtomicReference<Tensor> slot = new AtomicReference<>();
        PreparedReference first = new PreparedReference(slot);
        PreparedReference second = new PreparedReference(slot);
        first.beforeSleep();
        Tensor lent = slot.get();
        second.beforeSleep();
        assertSame(lent, slot.get());
        second.close();
        assertSame(lent, slot.get(), "only the getter that lent a spare takes it back");
        first.close();
        assertNull(slot.get());
        assertTrue(lent.isNull());
    }
}
