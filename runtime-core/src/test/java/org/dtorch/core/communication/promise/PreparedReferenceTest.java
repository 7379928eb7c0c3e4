package org.dtorch.core.communication.promise;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** What a getter prepares before it sleeps: who fills it, who owns it, who closes what nobody used. */
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
    void shouldLetTheCompleterFillBothLentHandlesSoTheGetterReturnsItsResultAsItIs() {
        AtomicReference<PreparedReference.Lent> slot = new AtomicReference<>();
        try (Tensor value = TestTensors.full(5f, 4)) {
            PreparedReference prepared = new PreparedReference(slot);
            prepared.beforeSleep();
            PreparedReference.Lent pair = slot.get();
            assertNotNull(pair, "a getter about to sleep lends a pair");
            Tensor own = PreparedReference.takeSpareFor(slot, value);
            assertSame(pair.own, own, "the completer fills the lent handle instead of making one");
            assertNull(slot.get());
            assertEquals(3L, value.use_count(), "the completer made both references: the promise's and the getter's");
            Tensor result = prepared.referenceTo(own);
            assertSame(pair.result, result, "the getter returns the handle the completer filled");
            assertEquals(3L, value.use_count(), "and makes no reference of its own");
            prepared.close();
            try (own; result) {
                assertTrue(own.defined() && result.defined(), "close() leaves the handles it handed out");
                assertEquals(value.data_ptr().address(), result.data_ptr().address());
            }
            assertEquals(1L, value.use_count());
        }
    }

    @Test
    void shouldCloseAPairNobodyTook() {
        AtomicReference<PreparedReference.Lent> slot = new AtomicReference<>();
        PreparedReference prepared = new PreparedReference(slot);
        prepared.beforeSleep();
        PreparedReference.Lent pair = slot.get();
        prepared.close();
        assertNull(slot.get(), "a pair the completer never took goes back");
        assertTrue(pair.own.isNull() && pair.result.isNull(), "and is closed");
        try (Tensor value = TestTensors.full(1f, 1); Tensor own = PreparedReference.takeSpareFor(slot, value)) {
            assertNotSame(pair.own, own, "a completer without a pair makes its own handle");
            assertEquals(value.data_ptr().address(), own.data_ptr().address());
        }
    }

    @Test
    void shouldLeaveTheResultToTheCompleterWhenTheGetterGaveUpBeforeItWasFilled() {
        AtomicReference<PreparedReference.Lent> slot = new AtomicReference<>();
        try (Tensor value = TestTensors.full(3f, 2)) {
            PreparedReference prepared = new PreparedReference(slot);
            prepared.beforeSleep();
            PreparedReference.Lent taken = slot.getAndSet(null); // the completer took it ...
            prepared.close(); // ... and the getter timed out before it was filled
            assertTrue(!taken.result.isNull(), "the getter does not close a handle being filled");
            try (Tensor own = PreparedReference.fill(taken, value)) {
                assertTrue(taken.result.isNull(), "the completer closes the result nobody will return");
                assertEquals(2L, value.use_count(), "only the promise's own reference is left");
                assertEquals(value.data_ptr().address(), own.data_ptr().address());
            }
        }
    }

    @Test
    void shouldCloseAFilledResultTheGetterDoesNotReturn() {
        AtomicReference<PreparedReference.Lent> slot = new AtomicReference<>();
        try (Tensor value = TestTensors.full(3f, 2)) {
            PreparedReference prepared = new PreparedReference(slot);
            prepared.beforeSleep();
            PreparedReference.Lent pair = slot.get();
            try (Tensor own = PreparedReference.takeSpareFor(slot, value)) {
                prepared.close(); // e.g. the getter was interrupted after the completer filled the pair
                assertTrue(pair.result.isNull(), "the getter owns a filled result: it closes what it does not return");
                assertEquals(2L, value.use_count());
            }
        }
    }

    @Test
    void shouldReturnTheCompletedValueWhenTheCompleterWhoFilledThePairLostTheRace() {
        AtomicReference<PreparedReference.Lent> slot = new AtomicReference<>();
        try (Tensor loser = TestTensors.full(1f, 2); Tensor winner = TestTensors.full(9f, 3)) {
            PreparedReference prepared = new PreparedReference(slot);
            prepared.beforeSleep();
            Tensor loserOwn = PreparedReference.takeSpareFor(slot, loser); // filled, but another completer completed
            try (Tensor result = prepared.referenceTo(winner)) {
                assertEquals(winner.data_ptr().address(), result.data_ptr().address(), "the value the future holds, not the loser's");
            }
            loserOwn.close();
            prepared.close();
            assertEquals(1L, loser.use_count());
            assertEquals(1L, winner.use_count());
        }
    }

    @Test
    void shouldLendOnePairWhateverTheNumberOfSleepingGetters() {
        AtomicReference<PreparedReference.Lent> slot = new AtomicReference<>();
        PreparedReference first = new PreparedReference(slot);
        PreparedReference second = new PreparedReference(slot);
        first.beforeSleep();
        PreparedReference.Lent lent = slot.get();
        second.beforeSleep();
        assertSame(lent, slot.get());
        second.close();
        assertSame(lent, slot.get(), "only the getter that lent a pair takes it back");
        first.close();
        assertNull(slot.get());
        assertTrue(lent.own.isNull());
    }

    @Test
    void shouldAllocateTheExpectedValueAndReturnItsReferenceWithoutANativeFill() {
        ExpectedValue expected = new ExpectedValue(new long[] {2, 3}, ScalarType.Long);
        try (PreparedReference prepared = new PreparedReference(expected)) {
            prepared.beforeSleep();
            assertNull(prepared.takeTarget(new long[] {3, 2}, ScalarType.Long), "another shape is not the prepared value");
            assertNull(prepared.takeTarget(new long[] {2, 3}, ScalarType.Int), "nor another dtype");
            try (Tensor target = prepared.takeTarget(new long[] {2, 3}, ScalarType.Long)) {
                assertNotNull(target);
                assertArrayEquals(new long[] {2, 3}, TorchTensors.shape(target));
                assertEquals(prepared.targetAddress(), target.data_ptr().address(), "the bytes go where the tensor's memory is");
                assertNull(prepared.takeTarget(new long[] {2, 3}, ScalarType.Long), "it is handed out once");
                try (Tensor result = prepared.referenceTo(target)) {
                    assertEquals(target.data_ptr().address(), result.data_ptr().address());
                    assertEquals(2L, target.use_count(), "the result was made before the sleep, one reference");
                }
            }
        }
    }

    @Test
    void shouldCloseAnExpectedValueThatDidNotFit() {
        ExpectedValue expected = new ExpectedValue(new long[] {4}, ScalarType.Float);
        try (Tensor other = TestTensors.full(7f, 5)) {
            PreparedReference prepared = new PreparedReference(expected);
            prepared.beforeSleep();
            assertNull(prepared.takeTarget(new long[] {5}, ScalarType.Float));
            try (Tensor result = prepared.referenceTo(other)) {
                assertEquals(other.data_ptr().address(), result.data_ptr().address(), "the result refers to the value read");
            }
            prepared.close();
            assertEquals(1L, other.use_count());
        }
    }
}
