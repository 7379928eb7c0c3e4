package org.dtorch.core.communication.promise;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class PromiseFutureTest {

    @Test
    void shouldDeliverTheValueToABlockedGetter() throws Exception {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
        TensorFuture future = promise.getFuture();
        assertFalse(future.isReady());
        AtomicReference<Float> seen = new AtomicReference<>();
        Thread getter = Thread.ofPlatform().start(() -> {
            try (Tensor t = future.get()) {
                seen.set(t.select(0, 0).item_float());
            }
        });
        Await.parked(getter);
        try (Tensor value = TestTensors.full(4f, 3)) {
            promise.setValue(value);
        }
        getter.join(5000);
        assertEquals(4f, seen.get());
        assertTrue(future.isReady());
        try (Tensor again = future.waitFor(Duration.ofMillis(1)).orElseThrow()) {
            assertEquals(4f, again.select(0, 0).item_float());
        }
    }

    @Test
    void shouldDeliverAValueWithNoElement() {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
        TensorFuture future = promise.getFuture();
        try (Tensor value = TestTensors.pattern(new long[] {2, 0}, org.bytedeco.pytorch.global.torch.ScalarType.Long, 0, 1, 0)) {
            promise.setValue(value);
        }
        try (Tensor got = future.get()) {
            assertEquals("int64[2, 0] on cpu", org.dtorch.core.tensor.TorchTensors.describe(got));
        }
    }

    @Test
    void shouldHandAParkedGetterAReferenceThatOutlivesTheSettersHandle() throws Exception {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
        TensorFuture future = promise.getFuture();
        CompletableFuture<Tensor> got = new CompletableFuture<>();
        Thread getter = Thread.ofPlatform().start(() -> got.complete(future.get()));
        Await.parked(getter); // past the spin: the getter parked, having prepared its handles
        long address;
        try (Tensor value = TestTensors.full(6f, 5)) {
            address = value.data_ptr().address();
            promise.setValue(value);
        }
        getter.join(5000);
        try (Tensor value = got.get(1, TimeUnit.SECONDS)) {
            assertEquals(2L, value.use_count(), "the promise's reference and the getter's");
            assertEquals(address, value.data_ptr().address(), "in-process values are shared, not copied");
            assertEquals(6f, value.select(0, 4).item_float());
        }
    }

    @Test
    void shouldDeliverAValueSetAfterAParkedWaitTimedOut() {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
        TensorFuture future = promise.getFuture();
        assertTrue(future.waitFor(Duration.ofMillis(30)).isEmpty(), "parked, then timed out: the spare it lent goes back");
        try (Tensor value = TestTensors.full(8f, 2)) {
            promise.setValue(value);
        }
        try (Tensor got = future.get(); Tensor again = future.waitFor(Duration.ofMillis(1)).orElseThrow()) {
            assertEquals(8f, got.select(0, 1).item_float());
            assertEquals(got.data_ptr().address(), again.data_ptr().address());
        }
    }

    @Test
    void shouldRethrowTheErrorWithTheOriginalAsCause() {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
        TensorFuture future = promise.getFuture();
        IllegalStateException original = new IllegalStateException("kernel add on cpu:1 failed");
        promise.setException(original);
        assertTrue(future.isReady());
        FutureFailedException e = assertThrows(FutureFailedException.class, future::get);
        assertSame(original, e.getCause());
        assertTrue(e.getMessage().contains("kernel add on cpu:1 failed"), e.getMessage());
        assertThrows(FutureFailedException.class, () -> future.waitFor(Duration.ofMillis(1)));
    }

    @Test
    void shouldReturnEmptyWhenWaitTimesOutAndNotBeReady() {
        TensorFuture future = TensorPromises.create(TensorPromiseType.MEMORY).getFuture();
        long start = System.nanoTime();
        Optional<Tensor> value = future.waitFor(Duration.ofMillis(100));
        long waitedMillis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(value.isEmpty());
        assertTrue(waitedMillis >= 90, "waited only " + waitedMillis + " ms");
        assertFalse(future.isReady());
        assertThrows(IllegalArgumentException.class, () -> future.waitFor(Duration.ZERO));
    }

    @Test
    void shouldTimeOutGetAtTheGlobalDeadline() {
        CommOptions saved = CommOptions.global();
        CommOptions.setGlobal(saved.withTimeout(Duration.ofMillis(150)));
        try {
            TensorFuture future = TensorPromises.create(TensorPromiseType.MEMORY).getFuture();
            CommTimeoutException e = assertThrows(CommTimeoutException.class, future::get);
            assertTrue(e.getMessage().startsWith("TensorFuture.get() timed out after 150 ms: no value or error was set"), e.getMessage());
            VoidFuture done = TensorPromises.createVoid(TensorPromiseType.MEMORY).getFuture();
            assertThrows(CommTimeoutException.class, done::get);
        } finally {
            CommOptions.setGlobal(saved);
        }
    }

    @Test
    void shouldThrowWhenInterrupted() throws Exception {
        TensorFuture future = TensorPromises.create(TensorPromiseType.MEMORY).getFuture();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread getter = Thread.ofPlatform().start(() -> {
            try {
                future.get();
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        Await.parked(getter);
        getter.interrupt();
        getter.join(5000);
        assertInstanceOf(CommInterruptedException.class, failure.get());
    }

    @Test
    void shouldAllowOneFutureAndOneCompletion() {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
        promise.getFuture();
        assertThrows(IllegalStateException.class, promise::getFuture);
        try (Tensor t = TestTensors.full(1f, 1)) {
            promise.setValue(t);
            assertEquals(2, t.use_count(), "the promise keeps its own reference");
            assertThrows(IllegalStateException.class, () -> promise.setValue(t));
            assertEquals(2, t.use_count(), "a rejected second value must not leak a reference");
            assertThrows(IllegalStateException.class, () -> promise.setException(new RuntimeException("late")));
        }
        assertThrows(IllegalArgumentException.class, () -> TensorPromises.create(TensorPromiseType.MEMORY).setValue(null));
        VoidPromise v = TensorPromises.createVoid(TensorPromiseType.MEMORY);
        v.getFuture();
        assertThrows(IllegalStateException.class, v::getFuture);
        v.setValue();
        assertThrows(IllegalStateException.class, v::setValue);
    }

    @Test
    void shouldPushCompletionToCallbacksOnACallbackThread() throws Exception {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.MEMORY);
        TensorFuture future = promise.getFuture();
        CountDownLatch called = new CountDownLatch(1);
        AtomicReference<String> callbackThread = new AtomicReference<>();
        CompletableFuture<Float> first = future.toCompletableFuture().thenApply(t -> {
            callbackThread.set(Thread.currentThread().getName());
            called.countDown();
            return t.select(0, 0).item_float();
        });
        // Completing the view must not complete the future.
        future.toCompletableFuture().complete(null);
        assertFalse(future.isReady());
        Thread producer = Thread.ofPlatform().name("worker-7").start(() -> {
            try (Tensor t = TestTensors.full(9f, 2)) {
                promise.setValue(t);
            }
        });
        assertTrue(called.await(5, TimeUnit.SECONDS));
        producer.join();
        assertEquals(9f, first.get());
        assertTrue(callbackThread.get().startsWith("dtorch-callbacks-"),
            "the callback runs on a callback thread, not on the completing worker: " + callbackThread.get());
    }

    @Test
    void shouldNotStallTheCompleterWhenACallbackBlocks() throws Exception {
        for (boolean failing : new boolean[] {false, true}) {
            TensorPromise first = TensorPromises.create(TensorPromiseType.MEMORY);
            TensorPromise second = TensorPromises.create(TensorPromiseType.MEMORY);
            TensorFuture firstFuture = first.getFuture();
            TensorFuture secondFuture = second.getFuture();
            // The callback of the first value waits for the second, which the same "worker" sets right after the first:
            // run on the worker, it would wait for ever.
            CompletableFuture<Float> chained = firstFuture.toCompletableFuture().handle((value, error) -> {
                try (Tensor t = secondFuture.get()) {
                    return t.select(0, 0).item_float();
                }
            });
            Thread worker = Thread.ofPlatform().name("worker-3").start(() -> {
                try (Tensor a = TestTensors.full(1f, 2); Tensor b = TestTensors.full(2f, 2)) {
                    if (failing) {
                        first.setException(new IllegalStateException("kernel failed on purpose"));
                    } else {
                        first.setValue(a);
                    }
                    second.setValue(b);
                }
            });
            worker.join(5000);
            assertFalse(worker.isAlive(), "the worker is not held by a callback (failing=" + failing + ")");
            assertEquals(2f, chained.get(5, TimeUnit.SECONDS));
        }
    }

    @Test
    void shouldTimeOutGetAtThePromisesOwnDeadline() {
        TensorFuture future = TensorPromises.create(TensorPromiseType.MEMORY, Duration.ofMillis(150)).getFuture();
        assertEquals(Duration.ofMillis(150), future.timeout());
        long start = System.nanoTime();
        CommTimeoutException e = assertThrows(CommTimeoutException.class, future::get);
        assertTrue(e.getMessage().startsWith("TensorFuture.get() timed out after 150 ms"), e.getMessage());
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(30), "not the global 300 s");
        VoidFuture done = TensorPromises.createVoid(TensorPromiseType.MEMORY, Duration.ofMillis(150)).getFuture();
        assertThrows(CommTimeoutException.class, done::get);
        VoidFutureCollect all = new VoidFutureCollect(List.of(TensorPromises.createVoid(TensorPromiseType.MEMORY).getFuture()),
            Duration.ofMillis(150));
        assertEquals(Duration.ofMillis(150), all.timeout());
        assertThrows(CommTimeoutException.class, all::get);
        assertThrows(IllegalArgumentException.class, () -> TensorPromises.create(TensorPromiseType.MEMORY, Duration.ZERO));
    }

    @Test
    void shouldCollectVoidFuturesAndFailFast() {
        VoidPromise a = TensorPromises.createVoid(TensorPromiseType.MEMORY);
        VoidPromise b = TensorPromises.createVoid(TensorPromiseType.MEMORY);
        VoidPromise c = TensorPromises.createVoid(TensorPromiseType.MEMORY);
        VoidFutureCollect all = new VoidFutureCollect(List.of(a.getFuture(), b.getFuture(), c.getFuture()));
        assertEquals(3, all.size());
        a.setValue();
        assertFalse(all.isReady());
        assertFalse(all.waitFor(Duration.ofMillis(20)));
        RuntimeException boom = new RuntimeException("device cpu:1 lost");
        b.setException(boom);
        assertTrue(all.isReady(), "the first failure completes the collection without waiting for the rest");
        FutureFailedException e = assertThrows(FutureFailedException.class, all::get);
        assertTrue(e.getMessage().contains("future 1 of 3 failed") && e.getMessage().contains("device cpu:1 lost"), e.getMessage());
        assertSame(boom, e.getCause().getCause());

        VoidPromise d = TensorPromises.createVoid(TensorPromiseType.MEMORY);
        VoidPromise f = TensorPromises.createVoid(TensorPromiseType.MEMORY);
        VoidFutureCollect ok = VoidFutureCollect.of(d.getFuture(), f.getFuture());
        d.setValue();
        f.setValue();
        assertTrue(ok.waitFor(Duration.ofSeconds(1)));
        ok.get();
        assertTrue(new VoidFutureCollect(List.of()).isReady());
    }

    @Test
    void shouldRejectBackendsClearly() {
        assertThrows(UnsupportedOperationException.class, () -> TensorPromises.create(TensorPromiseType.MEMORY).serialize());
        assertThrows(IllegalArgumentException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.MEMORY, "x"));
        assertThrows(IllegalArgumentException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.FILE, "/dtorch-x"));
        IllegalArgumentException net = assertThrows(IllegalArgumentException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.NETWORK, "x"));
        assertTrue(net.getMessage().contains("is not a Network promise"), net.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.NETWORK, "tcp://h:x/dtorch/promise/1"));
        assertEquals(TensorPromiseType.MEMORY, TensorPromises.create(TensorPromiseType.MEMORY).type());
    }
}
