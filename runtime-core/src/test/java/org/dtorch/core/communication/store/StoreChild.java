package org.dtorch.core.communication.store;

import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.testing.TestTensors;

/**
 * One participant of a File store in a child JVM, for {@link FileTensorStoreProcessTest}:
 * {@code StoreChild <scenario> <instance> <storeKey> <worldSize> <rank>}. Prints progress lines the test
 * waits for; exits 0 when its scenario passed.
 */
public final class StoreChild {
    static final DeviceStream CPU = DeviceStream.of(Device.cpu(0));

    private StoreChild() {
    }

    public static void main(String[] args) {
        String scenario = args[0];
        TensorStoreCreateInfo info = TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).instanceId(args[1]).storeKey(args[2])
            .worldSize(Integer.parseInt(args[3])).rank(Integer.parseInt(args[4])).timeout(Duration.ofSeconds(30)).build();
        try {
            switch (scenario) {
                case "ring" -> {
                    try (TensorStore store = TensorStore.createForParticipants(info)) {
                        System.out.println("BACKEND " + store.getClass().getSimpleName());
                        ring(store);
                        store.reset();
                    }
                }
                case "produce-and-wait" -> {
                    TensorStore store = TensorStore.create(info);
                    try (Tensor held = TestTensors.full(6f, 1 << 18)) {
                        store.srcSet("held", held, CPU, 2);
                        System.out.println("SET");
                        store.srcWaitUntilGetFinished("held", CPU); // the test kills us here
                    }
                }
                case "consume-and-hang" -> {
                    TensorStore store = TensorStore.create(info);
                    Tensor got = store.destGet("held", CPU);
                    System.out.println("TOOK " + got.sum().item_double());
                    Thread.sleep(Duration.ofMinutes(5)); // the test kills us here
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
     * Every rank sends {@code rank + 1} to every other, small (inline) from even ranks and large (a data
     * region) from odd ones, and checks what it receives.
     */
    static void ring(TensorStore store) {
        int world = store.worldSize();
        int rank = store.rank();
        long numel = rank % 2 == 0 ? 5 : 300_000;
        try (Tensor mine = TestTensors.full(rank + 1, numel)) {
            store.srcSet("from/" + rank, mine, CPU, world - 1);
            for (int other = 0; other < world; other++) {
                if (other == rank) {
                    continue;
                }
                try (Tensor got = store.destGet("from/" + other, CPU)) {
                    long expectedNumel = other % 2 == 0 ? 5 : 300_000;
                    double mean = got.sum().item_double() / got.numel();
                    if (got.numel() != expectedNumel || mean != other + 1) {
                        throw new AssertionError("rank " + rank + " got numel " + got.numel() + " mean " + mean + " from rank " + other);
                    }
                }
                store.destFinishGet("from/" + other, CPU);
            }
            store.srcWaitUntilGetFinished("from/" + rank, CPU);
        }
    }
}
