package org.dtorch.core.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class DeviceTest {

    @Test
    void shouldPrintDevices() {
        assertEquals("cpu:0", Device.cpu(0).toString());
        assertEquals("gpu:3", Device.gpu(3).toString());
        assertThrows(IllegalArgumentException.class, () -> Device.cpu(-1));
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
    void shouldSayGpuStreamsComeWithTheGpuIssue() {
        UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class, () -> DeviceStream.of(Device.gpu(0)));
        assertTrue(e.getMessage().contains("GPU issue"), e.getMessage());
        assertThrows(UnsupportedOperationException.class, () -> DeviceEvent.create(Device.gpu(0)));
    }
}
