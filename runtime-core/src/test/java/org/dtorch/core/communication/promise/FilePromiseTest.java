package org.dtorch.core.communication.promise;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * File promises within one process: the promise is rebuilt from its serialized name, as a worker process
 * does, and completed from another thread ({@code FilePromiseProcessTest} crosses real processes).
 */
@Timeout(60)
class FilePromiseTest {

    @Test
    void shouldCarrySmallAndLargeValuesThroughTheSerializedName() throws Exception {
        for (long numel : new long[] {7, 1 << 20}) {
            TensorPromise created = TensorPromises.create(TensorPromiseType.FILE);
            TensorFuture future = created.getFuture();
            String name = created.serialize();
            assertTrue(name.startsWith(SharedRegion.PREFIX) && SharedRegion.exists(name), name);
            assertFalse(future.isReady());
            assertTrue(future.waitFor(Duration.ofMillis(20)).isEmpty());
            try (Tensor value = TestTensors.full(3f, numel)) {
                Thread setter = Thread.ofPlatform().start(() -> TensorPromises.fromSerialized(TensorPromiseType.FILE, name).setValue(value));
                try (Tensor got = future.get(); Tensor again = future.get()) {
                    assertTrue(TestTensors.same(value, got), TestTensors.diff(value, got));
                    assertEquals(got.data_ptr().address(), again.data_ptr().address(), "the value is read once");
                }
                setter.join();
            }
            assertTrue(future.isReady());
            assertTrue(ShmWait.gone(name) && ShmWait.gone(name + "-v"), "a future that read its value removes the names");
            IllegalStateException twice = assertThrows(IllegalStateException.class, () -> created.setValue(TestTensors.full(1f, 1)));
            assertTrue(twice.getMessage().contains("already completed"), twice.getMessage());
        }
    }

    /**
     * A value with no element (a device's zero-size shard, or a tensor of no element) completes the promise like any
     * other: its shape and dtype arrive, and its no bytes need no value region; with an expected value of that shape the
     * getter's own tensor is the value.
     */
    @Test
    void shouldCarryAValueWithNoElementWithoutAValueRegion() throws Exception {
        for (ExpectedValue expected : new ExpectedValue[] {null, new ExpectedValue(new long[] {0, 3}, ScalarType.Float)}) {
            TensorPromise created = TensorPromises.create(TensorPromiseType.FILE, null, expected);
            TensorFuture future = created.getFuture();
            String name = created.serialize();
            try (Tensor value = TestTensors.pattern(new long[] {0, 3}, ScalarType.Float, 0, 1, 0)) {
                Thread setter = Thread.ofPlatform().start(() -> TensorPromises.fromSerialized(TensorPromiseType.FILE, name).setValue(value));
                try (Tensor got = future.get()) {
                    assertTrue(TestTensors.same(value, got), TestTensors.diff(value, got));
                }
                setter.join();
            }
            assertTrue(ShmWait.gone(name) && !SharedRegion.exists(name + "-v"), "no value region for no bytes");
        }
    }

    @Test
    void shouldHandASleepingGetterItsValueAndKeepItReadableAfterAParkedTimeout() throws Exception {
        TensorPromise created = TensorPromises.create(TensorPromiseType.FILE);
        TensorFuture future = created.getFuture();
        assertTrue(future.waitFor(Duration.ofMillis(30)).isEmpty(), "slept on the futex, then timed out");
        String name = created.serialize();
        CompletableFuture<Tensor> got = new CompletableFuture<>();
        Thread getter = Thread.ofPlatform().start(() -> got.complete(future.get()));
        Await.asleep(getter); // past the spin: the getter sleeps on the futex, having made the handle it returns
        try (Tensor value = TestTensors.full(9f, 3)) {
            TensorPromises.fromSerialized(TensorPromiseType.FILE, name).setValue(value);
        }
        getter.join(5000);
        try (Tensor value = got.get(1, TimeUnit.SECONDS); Tensor again = future.get()) {
            assertTrue(TestTensors.same(TestTensors.full(9f, 3), value), TestTensors.values(value));
            assertEquals(value.data_ptr().address(), again.data_ptr().address(), "the value is read once");
        }
    }

    @Test
    void shouldCopyAnExpectedValueIntoTheTensorASleepingGetterAllocatedAndTakeAnyOtherValueAsBefore() throws Exception {
        // The expected shape and dtype, then values of another shape and of another dtype.
        Tensor[] values = {TestTensors.full(4f, 2, 3), TestTensors.full(5f, 3, 2),
            TestTensors.pattern(new long[] {2, 3}, ScalarType.Long, 0, 97, 1)};
        for (Tensor value : values) {
            TensorPromise created = TensorPromises.create(TensorPromiseType.FILE, null, new ExpectedValue(new long[] {2, 3}, ScalarType.Float));
            TensorFuture future = created.getFuture();
            String name = created.serialize();
            CompletableFuture<Tensor> got = new CompletableFuture<>();
            Thread getter = Thread.ofPlatform().start(() -> got.complete(future.get()));
            Await.asleep(getter); // past the spin: the getter sleeps on the futex, having allocated the expected value
            TensorPromises.fromSerialized(TensorPromiseType.FILE, name).setValue(value);
            getter.join(5000);
            try (value; Tensor result = got.get(1, TimeUnit.SECONDS); Tensor again = future.get()) {
                assertTrue(TestTensors.same(value, result), TestTensors.diff(value, result));
                assertEquals(result.data_ptr().address(), again.data_ptr().address(), "the value is read once");
            }
        }
    }

    @Test
    void shouldCarryTheErrorTextAndRejectASecondCompletion() {
        TensorPromise created = TensorPromises.create(TensorPromiseType.FILE);
        TensorFuture future = created.getFuture();
        TensorPromise remote = TensorPromises.fromSerialized(TensorPromiseType.FILE, created.serialize());
        remote.setException(new IllegalStateException("operator add#3 failed on cpu:1", new ArithmeticException("division by zero")));
        FutureFailedException e = assertThrows(FutureFailedException.class, future::get);
        assertInstanceOf(RemoteFailureException.class, e.getCause());
        assertTrue(e.getMessage().contains("IllegalStateException: operator add#3 failed on cpu:1")
            && e.getMessage().contains("caused by java.lang.ArithmeticException: division by zero"), e.getMessage());
        assertThrows(IllegalStateException.class, () -> created.setException(new RuntimeException("late")));
        assertThrows(FutureFailedException.class, () -> future.waitFor(Duration.ofSeconds(1)));
    }

    @Test
    void shouldCompleteTheCallbackViewFromTheWatcherThread() throws Exception {
        TensorPromise created = TensorPromises.create(TensorPromiseType.FILE);
        CompletableFuture<Tensor> view = created.getFuture().toCompletableFuture();
        VoidPromise done = TensorPromises.createVoid(TensorPromiseType.FILE);
        VoidFuture doneFuture = done.getFuture();
        CompletableFuture<Void> doneView = doneFuture.toCompletableFuture();
        VoidPromise failed = TensorPromises.createVoid(TensorPromiseType.FILE);
        VoidFutureCollect both = VoidFutureCollect.of(doneFuture, failed.getFuture());
        assertFalse(view.isDone() || doneView.isDone());
        try (Tensor value = TestTensors.full(5f, 100_000)) {
            TensorPromises.fromSerialized(TensorPromiseType.FILE, created.serialize()).setValue(value);
            assertEquals(5f * 100_000, view.get(10, TimeUnit.SECONDS).sum().item_float());
        }
        TensorPromises.voidFromSerialized(TensorPromiseType.FILE, done.serialize()).setValue();
        doneView.get(10, TimeUnit.SECONDS);
        doneFuture.get();
        TensorPromises.voidFromSerialized(TensorPromiseType.FILE, failed.serialize()).setException(new RuntimeException("device cpu:2 lost"));
        FutureFailedException e = assertThrows(FutureFailedException.class, both::get);
        assertTrue(e.getMessage().contains("future 1 of 2 failed") && e.getMessage().contains("device cpu:2 lost"), e.getMessage());
    }

    @Test
    void shouldRejectBadNamesAndRebuiltFutures() {
        assertThrows(IllegalArgumentException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.FILE, "not-ours"));
        IllegalStateException missing = assertThrows(IllegalStateException.class,
            () -> TensorPromises.fromSerialized(TensorPromiseType.FILE, SharedRegion.PREFIX + "p1-x-pr-999999"));
        assertTrue(missing.getMessage().contains("does not exist"), missing.getMessage());
        VoidPromise voidPromise = TensorPromises.createVoid(TensorPromiseType.FILE);
        assertThrows(IllegalStateException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.FILE, voidPromise.serialize()),
            "a void promise is not a tensor promise");
        TensorPromise created = TensorPromises.create(TensorPromiseType.FILE);
        TensorPromise rebuilt = TensorPromises.fromSerialized(TensorPromiseType.FILE, created.serialize());
        assertThrows(IllegalStateException.class, rebuilt::getFuture);
        created.getFuture();
        assertThrows(IllegalStateException.class, created::getFuture);
        assertTrue(TensorPromises.abandon(created, new RuntimeException("never ran")));
        assertFalse(TensorPromises.abandon(created, new RuntimeException("twice")));
    }

    @Test
    void shouldRemoveTheNamesOfAFutureDroppedUnread() throws Exception {
        TensorPromise created = TensorPromises.create(TensorPromiseType.FILE);
        String name = created.serialize();
        dropFuture(created);
        // The collector's cleaner removes the name, then releases the view: wait for both.
        Await.until(() -> {
            System.gc();
            return !SharedRegion.exists(name) && ShmTensors.liveViewCount() == 0;
        }, Duration.ofSeconds(10), "a future collected unread removes its region's name and releases its view");
        // The worker side then finds nothing to attach to and says so.
        assertThrows(IllegalStateException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.FILE, name));
        List.of(created).forEach(p -> assertEquals(TensorPromiseType.FILE, p.type()));
    }

    private static void dropFuture(TensorPromise promise) {
        promise.getFuture();
    }
}
