package org.dtorch.core.communication.promise;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.Socket;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.OnThread;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Network promises made in this JVM and completed in another one, through a real {@code TCPStore} on 127.0.0.1: a
 * value (exact, non-contiguous float64 and int32), an error, a void promise, a future's own timeout naming its key, and
 * the futures' callbacks.
 */
@Tag("multinode")
@Timeout(120)
class NetworkPromiseTest {

    /** A non-contiguous float64 value with negative numbers: {@code [5, 3]}, the transpose of a {@code [3, 5]} pattern. */
    static Tensor doubles() {
        try (Tensor base = TestTensors.pattern(new long[] {3, 5}, ScalarType.Double, 0, 1000, -7)) {
            return base.t();
        }
    }

    static Tensor ints() {
        return TestTensors.pattern(new long[] {2, 3, 4}, ScalarType.Int, 3, 11, 0);
    }

    @Test
    void shouldCarryValueErrorAndDoneFromAnotherJvm() throws Exception {
        NetworkPromiseStore sharedStore = NetworkPromiseStore.host("127.0.0.1");
        TensorPromise value = TensorPromises.create(TensorPromiseType.NETWORK);
        TensorPromise failing = TensorPromises.create(TensorPromiseType.NETWORK);
        VoidPromise done = TensorPromises.createVoid(TensorPromiseType.NETWORK);
        TensorPromise shared = NetworkPromises.create("127.0.0.1", sharedStore.port(), null);
        assertTrue(value.serialize().matches("tcp://127\\.0\\.0\\.1:\\d+/dtorch/promise/[0-9a-f-]+"), value.serialize());
        TensorFuture valueFuture = value.getFuture();
        TensorFuture failingFuture = failing.getFuture();
        VoidFuture doneFuture = done.getFuture();
        TensorFuture sharedFuture = shared.getFuture();
        CompletableFuture<Tensor> valueView = valueFuture.toCompletableFuture();
        CompletableFuture<Tensor> failingView = failingFuture.toCompletableFuture();
        CompletableFuture<Void> doneView = doneFuture.toCompletableFuture();
        assertFalse(sharedFuture.isReady());
        try (ChildJvm child = ChildJvm.start("network-promise-child", NetworkPromiseChild.class, Map.of(), value.serialize(),
            failing.serialize(), done.serialize(), shared.serialize())) {
            child.awaitLine("ATTACHED", Duration.ofSeconds(60));
            OnThread<Tensor> getter = OnThread.start("value-getter", valueFuture::get);
            Await.asleep(getter.thread()); // the value comes to a getter blocked in the store's wait
            child.send("GO");
            try (Tensor got = getter.result().get(60, TimeUnit.SECONDS); Tensor expected = doubles()) {
                assertTrue(TestTensors.same(expected, got), TestTensors.diff(expected, got));
                assertTrue(got.is_contiguous());
            }
            try (Tensor got = sharedFuture.get(); Tensor again = sharedFuture.get(); Tensor expected = ints()) {
                assertTrue(TestTensors.same(expected, got), TestTensors.diff(expected, got));
                assertTrue(TestTensors.same(expected, again));
            }
            FutureFailedException e = assertThrows(FutureFailedException.class, failingFuture::get);
            assertTrue(e.getMessage().contains("IllegalArgumentException: bad shard on cpu:3"), e.getMessage());
            doneFuture.get();
            assertTrue(doneFuture.isReady() && valueFuture.isReady());
            try (Tensor expected = doubles()) {
                assertTrue(TestTensors.same(expected, valueView.get(10, TimeUnit.SECONDS)));
            }
            ExecutionException viewError = assertThrows(ExecutionException.class, () -> failingView.get(10, TimeUnit.SECONDS));
            assertSame(RemoteFailureException.class, viewError.getCause().getClass());
            doneView.get(10, TimeUnit.SECONDS);
            child.send("READ");
            child.awaitSuccess(Duration.ofSeconds(60));
            assertTrue(child.output().contains("SECOND REFUSED TensorPromise.setValue: the promise is already completed"), child.output());
        }
        sharedStore.release();
    }

    @Test
    void shouldTimeOutNamingTheKey() throws Exception {
        TensorPromise never = TensorPromises.create(TensorPromiseType.NETWORK, Duration.ofMillis(400));
        TensorFuture future = never.getFuture();
        String key = never.serialize().substring(never.serialize().indexOf("/dtorch/") + 1);
        CompletableFuture<Tensor> view = future.toCompletableFuture();
        assertTrue(future.waitFor(Duration.ofMillis(200)).isEmpty());
        CommTimeoutException e = assertThrows(CommTimeoutException.class, future::get);
        assertTrue(e.getMessage().contains("no value or error was set under key " + key + " in the TCPStore at 127.0.0.1:"), e.getMessage());
        ExecutionException viewError = assertThrows(ExecutionException.class, () -> view.get(10, TimeUnit.SECONDS));
        assertTrue(viewError.getCause().getMessage().contains(key), viewError.getCause().getMessage());
        assertTrue(TensorPromises.abandon(never, new IllegalStateException("the worker is gone")));
        assertFalse(TensorPromises.abandon(never, new IllegalStateException("twice")));
        FutureFailedException failed = assertThrows(FutureFailedException.class, future::get);
        assertTrue(failed.getMessage().contains("the worker is gone"), failed.getMessage());
        VoidPromise silent = TensorPromises.createVoid(TensorPromiseType.NETWORK, Duration.ofMillis(300));
        VoidFuture silentFuture = silent.getFuture();
        assertFalse(silentFuture.waitFor(Duration.ofMillis(100)));
        CommTimeoutException voidTimeout = assertThrows(CommTimeoutException.class, silentFuture::get);
        assertTrue(voidTimeout.getMessage().startsWith("VoidFuture.get() timed out after"), voidTimeout.getMessage());
        assertTrue(voidTimeout.getMessage().contains(silent.serialize().substring(silent.serialize().indexOf("/dtorch/") + 1)));
        silent.setValue();
        assertTrue(silentFuture.waitFor(Duration.ofSeconds(10)) && silentFuture.isReady());
    }

    @Test
    void shouldRefuseBadInputBeforeSending() {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.NETWORK);
        assertThrows(IllegalArgumentException.class, () -> promise.setValue(new Tensor()));
        long elements = NetworkPromiseWire.MAX_VALUE_BYTES / 4 + 1;
        try (Tensor large = TestTensors.full(0f, elements)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> promise.setValue(large));
            assertTrue(e.getMessage().contains("at most " + NetworkPromiseWire.MAX_VALUE_BYTES + " bytes"), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> NetworkPromises.create("127.0.0.1", 0, null));
        assertThrows(IllegalArgumentException.class, () -> TensorPromises.fromSerialized(TensorPromiseType.NETWORK, "tcp://h:1/other/key"));
        TensorPromise rebuilt = TensorPromises.fromSerialized(TensorPromiseType.NETWORK, promise.serialize());
        assertThrows(IllegalStateException.class, rebuilt::getFuture);
        promise.setException(new IllegalStateException("never ran"));
        assertThrows(IllegalStateException.class, () -> rebuilt.setException(new IllegalStateException("late")));
        FutureFailedException failed = assertThrows(FutureFailedException.class, () -> promise.getFuture().get());
        assertTrue(failed.getMessage().contains("never ran"), failed.getMessage());
    }

    @Test
    void shouldListenOnlyOnTheAdvertisedAddress() throws Exception {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.NETWORK);
        NetworkPromise.Address address = NetworkPromise.parse(promise.serialize());
        try (Socket loopback = new Socket(InetAddress.getLoopbackAddress(), address.port())) {
            assertTrue(loopback.isConnected());
        }
        Optional<InetAddress> other = NetworkInterface.networkInterfaces().flatMap(NetworkInterface::inetAddresses)
            .filter(a -> !a.isLoopbackAddress() && !a.isLinkLocalAddress()).findFirst();
        if (other.isEmpty()) {
            System.out.println("shouldListenOnlyOnTheAdvertisedAddress: no address but loopback here, the refusal is not checked");
            return;
        }
        try (Socket outside = new Socket()) {
            assertThrows(ConnectException.class, () -> outside.connect(new InetSocketAddress(other.get(), address.port()), 2000));
        }
    }
}
