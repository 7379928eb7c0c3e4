package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The File store's CUDA paths with its participants as threads of this process: a CUDA value lent and taken in
 * one process (the producer's own address and event, nothing opened), and the moves between host and GPU for
 * consumers of the other device kind.
 */
@GpuTest
class FileTensorStoreCudaTest {
    private static final AtomicInteger KEYS = new AtomicInteger();
    private static final Device GPU = Device.cuda(0);
    private static final int PASSES = 1000;

    private final String instance = ShmFiles.freshInstance("ftsc");

    private TensorStoreCreateInfo info(String key, int world, int rank) {
        return TensorStoreCreateInfo.builder().type(TensorStoreType.FILE).storeKey(key).worldSize(world).rank(rank)
            .timeout(Duration.ofSeconds(60)).instanceId(instance).build();
    }

    @AfterEach
    void nothingLeft() {
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }

    @Test
    void shouldLendACudaTensorWithinOneProcessWithoutOpeningAnything() {
        String key = "threads-" + KEYS.incrementAndGet();
        long opened = CudaIpcTensors.mappingsOpened();
        int loans = CudaIpcTensors.liveLoanCount();
        List<String> results = RankThreads.run(2, Duration.ofSeconds(120), rank -> {
            DeviceStream stream = DeviceStream.create(GPU);
            stream.makeCurrent();
            try (TensorStore store = TensorStore.create(info(key, 2, rank)); TensorOptions options = TorchTensors.options(ScalarType.Float, GPU)) {
                if (rank == 0) {
                    try (Scalar one = new Scalar(1.0); Tensor value = torch.ones(new long[] {4L << 20}, options)) {
                        for (int i = 0; i < PASSES; i++) {
                            value.add_(one);
                        }
                        store.srcSet("v", value, stream, 1);
                        store.srcWaitUntilGetFinished("v", stream);
                        value.zero_(); // after the consumer's reads, which its finish waited for
                        stream.synchronize();
                    }
                    return "producer ok";
                }
                try (Tensor value = store.destGet("v", stream); Tensor min = value.min(); Tensor max = value.max()) {
                    assertTrue(value.is_cuda());
                    assertEquals(1.0 + PASSES, min.item_double(), "every element carries the producer's last pass");
                    assertEquals(1.0 + PASSES, max.item_double());
                }
                store.destFinishGet("v", stream);
                return "consumer ok";
            }
        });
        assertEquals(List.of("producer ok", "consumer ok"), results);
        assertEquals(opened, CudaIpcTensors.mappingsOpened(), "a consumer in the producer's process uses the producer's address");
        assertEquals(loans, CudaIpcTensors.liveLoanCount(), "the producer gave its loan back");
    }

    @Test
    void shouldMoveValuesBetweenHostAndGpuForConsumersOfTheOtherKind() {
        String key = "move-" + KEYS.incrementAndGet();
        try (TensorStore store = TensorStore.create(info(key, 1, 0)); TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor onGpu = torch.arange(new Scalar(0), new Scalar(100_000), options); Tensor onCpu = onGpu.cpu()) {
            DeviceStream gpu = DeviceStream.of(GPU);
            DeviceStream cpu = DeviceStream.of(Device.cpu(0));

            HostGpuMoves.check(store, onGpu, onCpu, gpu, GPU);

            // A small value (in the entry) for a CUDA and a CPU consumer at once; the CPU one takes it as it is.
            try (Tensor small = onCpu.narrow(0, 0, 5)) {
                store.srcSet("small-to-gpu", small, cpu, 2, DeviceKind.CUDA);
                try (Tensor onDevice = store.destGet("small-to-gpu", gpu); Tensor onHost = store.destGet("small-to-gpu", cpu)) {
                    assertTrue(onDevice.is_cuda());
                    assertFalse(onHost.is_cuda());
                    assertTrue(torch.equal(onHost, small));
                    try (Tensor back = onDevice.cpu()) {
                        assertTrue(torch.equal(back, small));
                    }
                }
                store.destFinishGet("small-to-gpu", gpu);
                store.destFinishGet("small-to-gpu", cpu);
                store.srcWaitUntilGetFinished("small-to-gpu", cpu);
            }

            // A lent CUDA value, taken with destGetAndToDevice onto the host by a consumer on a CPU stream.
            store.srcSet("lent", onGpu, gpu, 1);
            try (Tensor got = store.destGetAndToDevice("lent", cpu, Device.cpu(0))) {
                assertFalse(got.is_cuda());
                assertTrue(torch.equal(got, onCpu));
            }
            store.destFinishGet("lent", cpu);
            store.srcWaitUntilGetFinished("lent", gpu);
            assertEquals(0, ((FileTensorStore) store).liveKeyCount());
        }
    }
}
