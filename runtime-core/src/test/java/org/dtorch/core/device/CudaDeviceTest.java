package org.dtorch.core.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuLoad;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Test;

/** CUDA streams and events on c10's: a worker's own stream, events that order streams, clear errors. */
@GpuTest
class CudaDeviceTest {
    private static final Device GPU = Device.cuda(0);

    @Test
    void shouldGiveEachWorkerItsOwnStreamAndMakeItCurrent() throws Exception {
        assertTrue(Cuda.deviceCount() >= 1);
        assertEquals(null, Cuda.unavailableReason());
        DeviceStream before = DeviceStream.of(GPU);
        Thread worker = Thread.ofPlatform().start(() -> {
            DeviceStream own = DeviceStream.create(GPU);
            assertNotEquals(before, own, "a pool stream is not the default stream");
            own.makeCurrent();
            assertEquals(own, DeviceStream.of(GPU), "the current stream is the worker's");
        });
        worker.join();
        assertEquals(before, DeviceStream.of(GPU), "current streams are per thread");
        CudaUnavailableException missing = assertThrows(CudaUnavailableException.class, () -> DeviceStream.of(Device.cuda(Cuda.deviceCount())));
        assertTrue(missing.getMessage().contains("does not exist") && missing.getMessage().contains("--same-device"), missing.getMessage());
    }

    @Test
    void shouldOrderOneStreamAfterAnotherThroughAnEvent() {
        DeviceStream original = DeviceStream.of(GPU);
        DeviceStream producer = DeviceStream.create(GPU);
        DeviceStream consumer = DeviceStream.create(GPU);
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU); Scalar one = new Scalar(1.0)) {
            producer.makeCurrent();
            GpuLoad.busy(GPU);
            Tensor x = torch.zeros(new long[] {1L << 22}, options);
            for (int i = 0; i < 500; i++) {
                x.add_(one);
            }
            try (DeviceEvent done = producer.recordEvent()) {
                assertFalse(done.query(), "the busy matmuls and 500 passes are still running when record returns");
                consumer.makeCurrent();
                done.streamWaitEvent(consumer);
                try (Tensor sum = x.sum()) {
                    assertEquals(500.0 * (1 << 22), sum.item_double(), "the consumer saw every pass");
                }
                assertTrue(done.query());
            }
            x.close();
        } finally {
            producer.synchronize();
            original.makeCurrent();
        }
    }

    @Test
    void shouldBoundHostWaitsForTheDeviceByADeadline() {
        DeviceStream original = DeviceStream.of(GPU);
        DeviceStream busy = DeviceStream.create(GPU);
        busy.makeCurrent();
        try {
            GpuLoad.busy(GPU);
            DeviceTimeoutException stream = assertThrows(DeviceTimeoutException.class, () -> busy.synchronize(Duration.ofNanos(1)));
            assertTrue(stream.getMessage().startsWith("synchronize of stream(cuda:0, ") && stream.getMessage().contains("did not finish within"),
                stream.getMessage());
            try (DeviceEvent done = busy.recordEvent()) {
                DeviceTimeoutException event = assertThrows(DeviceTimeoutException.class, () -> done.synchronize(Duration.ofNanos(1)));
                assertTrue(event.getMessage().startsWith("synchronize of event(cuda:0)"), event.getMessage());
                done.synchronize(Duration.ofSeconds(60));
                assertTrue(done.query());
            }
            busy.synchronize();
        } finally {
            original.makeCurrent();
        }
    }

    /** GpuLoad's three 8192 x 8192 matmuls take about 60 ms of device time on an H200. */
    @Test
    void shouldTimeDeviceWorkBetweenTwoTimedEvents() {
        DeviceStream original = DeviceStream.of(GPU);
        DeviceStream busy = DeviceStream.create(GPU);
        busy.makeCurrent();
        try (DeviceEvent start = DeviceEvent.createTimed(GPU); DeviceEvent end = DeviceEvent.createTimed(GPU);
             DeviceEvent plain = DeviceEvent.create(GPU)) {
            start.record(busy);
            long launched = System.nanoTime();
            GpuLoad.busy(GPU);
            launched = System.nanoTime() - launched;
            end.record(busy);
            plain.record(busy);
            assertThrows(RuntimeException.class, () -> start.elapsedNanos(end), "c10 refuses events not completed yet");
            end.synchronize();
            long device = start.elapsedNanos(end);
            assertTrue(device > 5_000_000, "device time " + device + " ns (launch " + launched + " ns): over 5 ms expected");
            IllegalStateException untimed = assertThrows(IllegalStateException.class, () -> start.elapsedNanos(plain));
            assertTrue(untimed.getMessage().contains("createTimed"), untimed.getMessage());
            assertTrue(start.toString().startsWith("timed event(cuda:0"), start.toString());
        } finally {
            original.makeCurrent();
        }
    }

    @Test
    void shouldReuseClosedPlainEventsAsNewUnrecordedOnes() {
        DeviceStream original = DeviceStream.of(GPU);
        DeviceStream busy = DeviceStream.create(GPU);
        busy.makeCurrent();
        try {
            GpuLoad.busy(GPU);
            DeviceEvent first = busy.recordEvent();
            assertFalse(first.query(), "behind the busy matmuls");
            first.close();
            // The next plain event takes the closed one's native event, still pending on the matmuls,
            // yet it is a new event: nothing recorded, so nothing to wait for.
            try (DeviceEvent second = DeviceEvent.create(GPU)) {
                assertTrue(second.query(), "an event not recorded yet has nothing pending");
                second.synchronize(Duration.ofNanos(1));
                second.record(busy);
                assertFalse(second.query(), "recorded behind the same matmuls");
                second.synchronize(Duration.ofSeconds(60));
                assertTrue(second.query());
            }
            assertThrows(IllegalStateException.class, first::query, "a closed event stays closed");
        } finally {
            original.makeCurrent();
        }
    }

    @Test
    void shouldCopyBetweenHostAndDevice() {
        try (TensorOptions options = TorchTensors.options(ScalarType.Long, GPU);
             Tensor onGpu = torch.arange(new Scalar(0), new Scalar(10), options); Tensor host = TorchTensors.to(onGpu, Device.cpu(0));
             Tensor back = TorchTensors.to(host, GPU)) {
            assertEquals(GPU, TorchTensors.device(onGpu));
            assertEquals(Device.cpu(0), TorchTensors.device(host));
            assertEquals(45L, host.sum().item_long());
            assertTrue(torch.equal(back, onGpu));
            assertEquals("int64[10] on cuda:0", TorchTensors.describe(onGpu));
        }
    }
}
