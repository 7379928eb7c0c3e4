package org.dtorch.core.communication.promise;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.OnThread;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** File promises completed in a child JVM: the value, a value with no element, the error, and a future's own timeout. */
@Tag("multiprocess")
@Timeout(120)
class FilePromiseProcessTest {

    @Test
    void shouldSeeValueErrorAndOwnTimeoutAcrossProcesses() throws Exception {
        TensorPromise large = TensorPromises.create(TensorPromiseType.FILE);
        TensorPromise failing = TensorPromises.create(TensorPromiseType.FILE);
        VoidPromise done = TensorPromises.createVoid(TensorPromiseType.FILE);
        TensorPromise never = TensorPromises.create(TensorPromiseType.FILE);
        TensorPromise empty = TensorPromises.create(TensorPromiseType.FILE);
        TensorFuture emptyFuture = empty.getFuture();
        TensorFuture largeFuture = large.getFuture();
        TensorFuture failingFuture = failing.getFuture();
        VoidFuture doneFuture = done.getFuture();
        TensorFuture neverFuture = never.getFuture();
        var doneView = doneFuture.toCompletableFuture();
        try (ChildJvm child = ChildJvm.start("promise-child", PromiseChild.class, Map.of(), large.serialize(), failing.serialize(),
            done.serialize(), empty.serialize())) {
            child.awaitLine("ATTACHED", Duration.ofSeconds(60));
            OnThread<Tensor> getter = OnThread.start("large-getter", largeFuture::get);
            Await.asleep(getter.thread()); // the value comes to a getter asleep on the futex
            child.send("GO");
            try (Tensor value = getter.result().get(60, TimeUnit.SECONDS)) {
                assertEquals(8.0 * (1 << 20), value.sum().item_double());
            }
            try (Tensor nothing = emptyFuture.get()) {
                assertEquals("float32[0, 5] on cpu", org.dtorch.core.tensor.TorchTensors.describe(nothing));
            }
            FutureFailedException e = assertThrows(FutureFailedException.class, failingFuture::get);
            assertTrue(e.getMessage().contains("IllegalArgumentException: bad shard on cpu:3"), e.getMessage());
            doneFuture.get();
            doneView.get(10, java.util.concurrent.TimeUnit.SECONDS);
            long start = System.nanoTime();
            Optional<Tensor> nothing = neverFuture.waitFor(Duration.ofMillis(300));
            long waited = (System.nanoTime() - start) / 1_000_000;
            assertTrue(nothing.isEmpty());
            // Bounded by a tenth of the global deadline, not by wall-clock expectations a loaded machine can break:
            // what must not happen is a wait that ignores its own timeout for the global one.
            long bound = org.dtorch.core.communication.CommOptions.global().timeout().toMillis() / 10;
            assertTrue(waited >= 290 && waited < bound, "waited " + waited + " ms for a 300 ms timeout (bound " + bound + " ms)");
            child.awaitSuccess(Duration.ofSeconds(60));
        }
        assertTrue(ShmWait.gone(large.serialize()) && ShmWait.gone(large.serialize() + "-v"));
        assertTrue(TensorPromises.abandon(never, new RuntimeException("the worker is gone")));
        assertThrows(FutureFailedException.class, neverFuture::get);
    }
}
