package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The File store carrying CUDA tensors between JVMs through CUDA IPC: sub-blocks and views of one allocation,
 * values written after the producer's {@code srcSet} returned, one open per allocation however many hand-offs,
 * and kill -9 of either side noticed within the store's liveness window. The side that may be left with a stream
 * waiting forever for a killed process's event runs in a child JVM of its own.
 */
@GpuTest
@Tag("multiprocess")
@Timeout(240)
class FileTensorStoreCudaProcessTest {
    private static final AtomicInteger KEYS = new AtomicInteger();
    private static final Duration STARTUP = Duration.ofSeconds(90);
    private static final Device GPU = Device.cuda(0);

    private final String instance = ShmFiles.freshInstance("ftscp");
    private final int viewsBefore = CudaIpcTensors.liveViewCount();

    private TensorStoreCreateInfo info(String key, int world, int rank) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).storeKey(key).worldSize(world).rank(rank)
            .timeout(Duration.ofSeconds(60)).instanceId(instance).build();
    }

    private ChildJvm child(String scenario, String key, int world, int rank) {
        return ChildJvm.start("rank " + rank, CudaStoreChild.class, Map.of(), scenario, instance, key, String.valueOf(world),
            String.valueOf(rank));
    }

    @Test
    void shouldHandOffSubBlocksAndViewsOfOneAllocationWithTheProducersLastWrites() {
        String key = "blocks-" + KEYS.incrementAndGet();
        DeviceStream stream = DeviceStream.create(GPU);
        stream.makeCurrent();
        try (ChildJvm producer = child("lend-blocks", key, 2, 0)) {
            try (TensorStore store = TensorStore.create(info(key, 2, 1)); TensorOptions cpu = TorchTensors.options(ScalarType.Float, Device.cpu(0));
                 Tensor flat = torch.arange(new Scalar(1), new Scalar(4097), cpu); Tensor big = flat.reshape(64, 64)) {
                producer.awaitLine("SET", STARTUP);
                long opened = CudaIpcTensors.mappingsOpened();
                try (Tensor a = store.destGet("a", stream); Tensor b = store.destGet("b", stream);
                     Tensor narrowed = store.destGet("narrowed", stream); Tensor rows = store.destGet("rows", stream);
                     Tensor aHost = a.cpu(); Tensor bHost = b.cpu(); Tensor narrowedHost = narrowed.cpu(); Tensor rowsHost = rows.cpu();
                     Tensor expectedNarrowed = big.narrow(1, 3, 5); Tensor expectedRows = big.narrow(0, 10, 2)) {
                    assertTrue(a.is_cuda() && narrowed.is_cuda(), "values stay on the GPU");
                    // The producer wrote 4, 6 and arange + 1 after a second of queued work: the old 3, 5 and arange mean a missed wait.
                    assertEquals(4.0 * 256, aHost.sum().item_double(), "a: " + TorchTensors.format(aHost, 8));
                    assertEquals(6.0 * 256, bHost.sum().item_double(), "b, the second block of the same allocation");
                    assertTrue(torch.equal(expectedNarrowed, narrowedHost), "narrowed: " + TorchTensors.format(narrowedHost, 10));
                    assertTrue(torch.equal(expectedRows, rowsHost), "rows: " + TorchTensors.format(rowsHost, 10));
                    assertFalse(narrowed.is_contiguous(), "a strided view crosses as a view");
                    assertEquals(64, narrowed.stride(0));
                }
                assertEquals(1, CudaIpcTensors.mappingsOpened() - opened,
                    "a, b and the 64 x 64 tensor are sub-blocks of one allocation of the producer's caching allocator: one open");
                for (String k : new String[] {"a", "b", "narrowed", "rows"}) {
                    store.destFinishGet(k, stream);
                }
                assertEquals("SET 4", producer.awaitLine("SET", STARTUP), "the producer holds one loan per live key");
                producer.awaitSuccess(STARTUP);
            }
        }
        assertEquals(viewsBefore, CudaIpcTensors.liveViewCount(), "views of lent memory left alive");
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }

    @Test
    void shouldOpenAnAllocationOnceHoweverOftenItIsHandedOff() {
        String key = "twice-" + KEYS.incrementAndGet();
        DeviceStream stream = DeviceStream.create(GPU);
        stream.makeCurrent();
        try (ChildJvm producer = child("lend-twice", key, 2, 0); TensorStore store = TensorStore.create(info(key, 2, 1))) {
            long opened = CudaIpcTensors.mappingsOpened();
            try (Tensor first = store.destGet("first", stream); Tensor sum = first.sum()) {
                assertEquals(1 << 20, sum.item_double());
            }
            store.destFinishGet("first", stream);
            assertEquals(1, CudaIpcTensors.mappingsOpened() - opened, "the first hand-off opens the allocation");
            assertTrue(CudaIpcTensors.mappingCount() >= 1, "and keeps it");
            try (Tensor second = store.destGet("second", stream); Tensor sum = second.sum()) {
                assertEquals(2.0 * (1 << 20), sum.item_double(), "the producer's new values, through the cached mapping");
            }
            store.destFinishGet("second", stream);
            assertEquals(1, CudaIpcTensors.mappingsOpened() - opened, "the second hand-off of the same allocation opens nothing");
            producer.awaitSuccess(STARTUP);
        }
        assertEquals(viewsBefore, CudaIpcTensors.liveViewCount(), "views of lent memory left alive");
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }

    @Test
    void shouldFailTheConsumerWithinTheLivenessWindowWhenTheProducerIsKilledWhileItsWorkRuns() {
        String key = "killed-producer-" + KEYS.incrementAndGet();
        // Both start at once: creating a store is a barrier of all its participants.
        try (ChildJvm producer = child("lend-busy-and-wait", key, 2, 0)) {
            try (ChildJvm consumer = child("take-until-the-producer-dies", key, 2, 1)) {
                producer.awaitLine("SET", STARTUP);
                consumer.awaitLine("TOOK", STARTUP);
                producer.kill9();
                String outcome = consumer.awaitLine("F", Duration.ofSeconds(30));
                assertTrue(outcome.startsWith("FAILED "), "the consumer must fail, not finish: " + outcome + "\n" + consumer.output());
                long millis = Long.parseLong(outcome.split(" ")[1]);
                assertTrue(outcome.contains("participant rank 0 (pid " + producer.pid() + ") exited without closing"), outcome);
                // A quarter of the store's 60 s deadline: the death must be noticed, not waited out.
                assertTrue(millis < 15_000, "noticing the dead producer took " + millis + " ms");
                assertEquals("MAPPINGS 0 VIEWS 0", consumer.awaitLine("MAPPINGS", Duration.ofSeconds(30)),
                    "the consumer keeps nothing of the dead producer");
                consumer.awaitExit(Duration.ofSeconds(30));
            }
        }
        assertEquals(List.of(), ShmFiles.of(instance), "the last live participant must remove everything");
    }

    @Test
    void shouldFailTheProducerWithinTheLivenessWindowWhenAConsumerIsKilled() throws Exception {
        String key = "killed-consumer-" + KEYS.incrementAndGet();
        DeviceStream stream = DeviceStream.create(GPU);
        stream.makeCurrent();
        int loansBefore = CudaIpcTensors.liveLoanCount();
        try (ChildJvm consumer = child("take-and-hang", key, 2, 1); TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor value = torch.full(new long[] {1 << 18}, new Scalar(2.0), options)) {
            TensorStore store = TensorStore.create(info(key, 2, 0));
            try {
                store.srcSet("held", value, stream, 1);
                assertEquals(loansBefore + 1, CudaIpcTensors.liveLoanCount(), "the producer keeps the value while it is lent");
                AtomicLong killedAt = new AtomicLong();
                Thread killer = Thread.ofPlatform().start(() -> {
                    consumer.awaitLine("TOOK", STARTUP);
                    killedAt.set(System.nanoTime());
                    consumer.kill9();
                });
                CommException e = assertThrows(CommException.class, () -> store.srcWaitUntilGetFinished("held", stream));
                long millis = (System.nanoTime() - killedAt.get()) / 1_000_000;
                killer.join(10_000);
                assertTrue(e.getMessage().contains("participant rank 1 (pid " + consumer.pid() + ") exited without closing"), e.getMessage());
                assertTrue(e.getMessage().contains("0 of 1 consumers finished (1 took the tensor)"), e.getMessage());
                assertTrue(killedAt.get() != 0 && millis < 15_000, "noticing the dead consumer took " + millis + " ms");
            } finally {
                store.close();
            }
            assertEquals(loansBefore, CudaIpcTensors.liveLoanCount(), "closing the store gives the lent value back");
            try (Tensor sum = value.sum()) {
                assertEquals(2.0 * (1 << 18), sum.item_double(), "the producer's tensor is untouched and usable");
            }
        }
        assertEquals(List.of(), ShmFiles.of(instance));
    }
}
