package org.dtorch.core.communication.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuLoad;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.junit.jupiter.api.Test;

/**
 * The four-step handshake of the memory store on CUDA, stream-ordered: the producer publishes a value its
 * stream is still computing and does not wait for it; the consumer's stream waits for the producer's event; the
 * producer may overwrite the value as soon as its wait returns, because its stream then waits for the consumer's
 * finish event. Each check fails if the corresponding event wait were missing: the pending work is tens of
 * milliseconds long on purpose ({@link GpuLoad}).
 */
@GpuTest
class MemoryTensorStoreCudaTest {
    private static final Device GPU = Device.cuda(0);
    /** 4 Mi floats (16 MiB): each pass over them is a few microseconds of GPU time plus a launch. */
    private static final long NUMEL = 4L << 20;
    private static final int PASSES = 1000;

    @Test
    void shouldOrderTheHandOffOnTheStreamsWithoutBlockingTheHost() {
        String key = "cuda-" + GlobalCommInstanceId.next();
        CountDownLatch consumerQueuedItsReads = new CountDownLatch(1);
        List<String> results = RankThreads.run(2, Duration.ofSeconds(120), rank -> {
            DeviceStream stream = DeviceStream.create(GPU);
            stream.makeCurrent();
            try (TensorStore store = TensorStore.create(TensorStoreCreateInfo.builder().storeKey(key).worldSize(2).rank(rank)
                .timeout(Duration.ofSeconds(60)).build())) {
                return rank == 0 ? produce(store, stream, consumerQueuedItsReads) : consume(store, stream, consumerQueuedItsReads);
            }
        });
        assertEquals(List.of("producer ok", "consumer ok"), results);
    }

    /** Publishes 1 + PASSES while its stream still adds; then overwrites it with zeros right after the wait. */
    private static String produce(TensorStore store, DeviceStream stream, CountDownLatch consumerQueuedItsReads) {
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU); Scalar one = new Scalar(1.0);
             Tensor value = torch.ones(new long[] {NUMEL}, options)) {
            GpuLoad.busy(GPU);
            for (int i = 0; i < PASSES; i++) {
                value.add_(one);
            }
            store.srcSet("v", value, stream, 1);
            try (DeviceEvent afterSet = stream.recordEvent()) {
                assertFalse(afterSet.query(), "srcSet must not wait for the producer's stream");
            }
            try {
                assertTrue(consumerQueuedItsReads.await(60, TimeUnit.SECONDS), "the consumer queued its reads");
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            store.srcWaitUntilGetFinished("v", stream);
            // Stream-ordered after the consumer's reads; would corrupt them if the wait were missing.
            value.zero_();
            stream.synchronize();
            assertEquals(0.0, value.sum().item_double());
        }
        return "producer ok";
    }

    /** Sums the value PASSES times on its own stream, finishes, and checks the sums once the stream is done. */
    private static String consume(TensorStore store, DeviceStream stream, CountDownLatch consumerQueuedItsReads) {
        try (Tensor value = store.destGet("v", stream); Tensor acc = torch.zeros_like(value)) {
            assertTrue(value.is_cuda(), "the value stays on the GPU");
            for (int i = 0; i < PASSES; i++) {
                acc.add_(value);
            }
            store.destFinishGet("v", stream);
            consumerQueuedItsReads.countDown();
            double expected = (1.0 + PASSES) * PASSES;
            try (Tensor min = acc.min(); Tensor max = acc.max()) {
                assertEquals(expected, min.item_double(), "every element read " + (1 + PASSES) + " " + PASSES + " times");
                assertEquals(expected, max.item_double());
            }
        }
        return "consumer ok";
    }

    @Test
    void shouldMoveValuesBetweenHostAndGpuForConsumersOfTheOtherKind() {
        String key = "cuda-move-" + GlobalCommInstanceId.next();
        try (TensorStore store = TensorStore.create(TensorStoreCreateInfo.builder().storeKey(key).worldSize(1).rank(0)
                .timeout(Duration.ofSeconds(30)).build());
             TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor onGpu = torch.arange(new Scalar(0), new Scalar(12), options); Tensor onCpu = onGpu.cpu()) {
            HostGpuMoves.check(store, onGpu, onCpu, DeviceStream.of(GPU), GPU);
        }
    }
}
