package org.dtorch.core.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import org.junit.jupiter.api.Test;

class DeviceTest {

    @Test
    void shouldPrintDevices() {
        assertEquals("cpu:0", Device.cpu(0).toString());
        assertEquals("cuda:3", Device.cuda(3).toString());
        assertThrows(IllegalArgumentException.class, () -> Device.cpu(-1));
    }

    @Test
    void shouldRefuseTimingOnCpuAndOnEventsCreatedWithoutIt() {
        IllegalArgumentException cpu = assertThrows(IllegalArgumentException.class, () -> DeviceEvent.createTimed(Device.cpu(0)));
        assertTrue(cpu.getMessage().contains("cpu:0"), cpu.getMessage());
        DeviceEvent plain = DeviceStream.of(Device.cpu(0)).recordEvent();
        IllegalStateException untimed = assertThrows(IllegalStateException.class, () -> plain.elapsedNanos(plain));
        assertTrue(untimed.getMessage().contains("DeviceEvent.createTimed"), untimed.getMessage());
    }

    @Test
    void shouldGiveCpuStreamsAndEventsThatNeverBlock() {
        DeviceStream stream = DeviceStream.of(Device.cpu(2));
        assertEquals(Device.cpu(2), stream.device());
        assertEquals(stream, DeviceStream.of(Device.cpu(2)));
        DeviceEvent event = stream.recordEvent();
        assertTrue(event.query());
        event.streamWaitEvent(DeviceStream.of(Device.cpu(0)));
        event.synchronize();
        stream.synchronize();
    }

    @Test
    void shouldRefuseInterprocessEventsWhereNothingCrosses() {
        assertThrows(IllegalArgumentException.class, () -> DeviceEvent.createInterprocess(Device.cpu(0)));
        assertThrows(IllegalArgumentException.class, () -> DeviceEvent.openIpc(Device.cpu(0), new byte[DeviceEvent.IPC_HANDLE_BYTES]));
        IllegalArgumentException size = assertThrows(IllegalArgumentException.class, () -> DeviceEvent.openIpc(Device.cuda(0), new byte[3]));
        assertTrue(size.getMessage().contains("64 bytes, got 3"), size.getMessage());
        IllegalStateException local = assertThrows(IllegalStateException.class, () -> DeviceStream.of(Device.cpu(0)).recordEvent().ipcHandle());
        assertTrue(local.getMessage().contains("not an interprocess event"), local.getMessage());
    }

    @Test
    void shouldNameWhatIsMissingWhereCudaIsNotAvailable() {
        assumeFalse(Cuda.isAvailable(), "CUDA is available here");
        CudaUnavailableException e = assertThrows(CudaUnavailableException.class, () -> DeviceStream.of(Device.cuda(0)));
        assertTrue(e.getMessage().startsWith("cuda:0 is not usable: ") && e.getMessage().contains(Cuda.unavailableReason()), e.getMessage());
        assertTrue(Cuda.unavailableReason().contains("-Pgpu"), "the default build has the CPU natives: " + Cuda.unavailableReason());
        assertThrows(CudaUnavailableException.class, () -> DeviceEvent.create(Device.cuda(0)));
        assertThrows(CudaUnavailableException.class, () -> DeviceEvent.createInterprocess(Device.cuda(0)));
        assertThrows(CudaUnavailableException.class, () -> DeviceEvent.openIpc(Device.cuda(0), new byte[DeviceEvent.IPC_HANDLE_BYTES]));
        assertThrows(CudaUnavailableException.class, () -> DeviceStream.create(Device.cuda(1)));
        assertEquals(0, Cuda.deviceCount());
        Cuda.require(Device.cpu(3)); // CPU devices need nothing
    }
}
