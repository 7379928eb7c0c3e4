package org.dtorch.core.communication.store;

import java.io.IOException;
import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.testing.ChildMain;
import org.dtorch.core.testing.TestTensors;

/**
 * One participant of a Network store in a child JVM, for {@link NetworkTensorStoreProcessTest}:
 * {@code NetworkStoreChild <scenario> <host:port> <storeKey> <worldSize> <rank> <timeoutMillis>}, its host identity
 * given by {@code -Ddtorch.host.id}. Prints progress lines the test waits for; exits 0 when its scenario passed.
 */
public final class NetworkStoreChild {
    private NetworkStoreChild() {
    }

    /** The value rank 0 sets for its two consumers: 2 MiB of float32 whose every value is exact. */
    static Tensor weights() {
        return TestTensors.pattern(new long[] {512, 1024}, ScalarType.Float, 11, 65_521, -30_000);
    }

    /** The second value: int64 beyond 2^53, so that a detour through a double would show. */
    static Tensor ids() {
        return TestTensors.pattern(new long[] {7, 3}, ScalarType.Long, 1, 1L << 20, (1L << 53) + 1);
    }

    public static void main(String[] args) {
        String scenario = args[0];
        TensorStoreCreateInfo info = TensorStoreCreateInfo.builder().type(TensorStoreType.MEMORY).rendezvous(RendezvousAddress.parse(args[1]))
            .storeKey(args[2]).worldSize(Integer.parseInt(args[3])).rank(Integer.parseInt(args[4]))
            .timeout(Duration.ofMillis(Long.parseLong(args[5]))).build();
        try {
            switch (scenario) {
                case "consume" -> consume(info);
                case "never-set" -> {
                    try (TensorStore store = TensorStore.create(info.toBuilder().type(TensorStoreType.NETWORK).build())) {
                        try {
                            store.destGet("never", StoreChild.CPU).close();
                            throw new AssertionError("destGet of a key nobody sets returned");
                        } catch (CommTimeoutException e) {
                            System.out.println("TIMEOUT " + e.getMessage());
                        }
                        store.barrier();
                    }
                }
                case "join-missing" -> {
                    System.out.println("STARTING");
                    try {
                        TensorStore.create(info.toBuilder().type(TensorStoreType.NETWORK).build()).close();
                        throw new AssertionError("a store with a missing rank was created");
                    } catch (CommTimeoutException e) {
                        System.out.println("FAILED " + e.getMessage());
                    }
                }
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            }
            System.out.println("OK");
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }

    /**
     * Takes both of rank 0's values and checks them bit for bit; rank 1 finishes at once, rank 2 holds its take of the
     * weights until it has printed {@code HOLDING} and the parent says {@code FINISH}. Then every rank resets, runs a ring
     * exchange and meets at a barrier.
     */
    private static void consume(TensorStoreCreateInfo info) throws IOException {
        try (TensorStore store = TensorStore.createForParticipants(info); Tensor weights = weights(); Tensor ids = ids()) {
            System.out.println("BACKEND " + store.getClass().getSimpleName());
            try (Tensor got = store.destGet("weights", StoreChild.CPU)) {
                if (!TestTensors.same(weights, got)) {
                    throw new AssertionError("weights differ: " + TestTensors.diff(weights, got));
                }
            }
            try (Tensor got = store.destGet("ids", StoreChild.CPU)) {
                if (!TestTensors.same(ids, got)) {
                    throw new AssertionError("ids differ: " + TestTensors.diff(ids, got));
                }
            }
            System.out.println("TOOK exact");
            store.destFinishGet("ids", StoreChild.CPU);
            if (store.rank() == 2) {
                System.out.println("HOLDING");
                ChildMain.awaitParent("FINISH"); // once the parent saw its wait go on while this take is held
                System.out.println("FINISHING");
            }
            store.destFinishGet("weights", StoreChild.CPU);
            System.out.println("FINISHED");
            store.reset();
            StoreChild.ring(store);
            store.barrier();
        }
    }
}
