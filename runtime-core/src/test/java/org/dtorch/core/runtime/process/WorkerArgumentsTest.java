package org.dtorch.core.runtime.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.CudaUnavailableException;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.runtime.EagerRuntime;
import org.dtorch.core.runtime.RuntimeOptions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/** What a worker process is told about its device, and what it makes of it. */
class WorkerArgumentsTest {
    private static final Path SOCKET = Path.of("/dev/shm/dtorch-test-ctl/sock");

    private static RuntimeOptions options(DeviceKind kind, int count, boolean sameDevice) {
        return new RuntimeOptions(kind, count, sameDevice, true, Duration.ofSeconds(30), Duration.ofSeconds(2));
    }

    private static WorkerMain.Devices devicesOf(RuntimeOptions options, Device device) {
        List<String> args = WorkerPool.arguments(options, device, "inst", "board", SOCKET);
        return WorkerMain.Devices.of(WorkerMain.parse(args.toArray(String[]::new)));
    }

    @Test
    void shouldRunEverySameDeviceCudaWorkerOnCuda0() {
        RuntimeOptions options = options(DeviceKind.CUDA, 4, true);
        for (int i = 0; i < 4; i++) {
            WorkerMain.Devices devices = devicesOf(options, Device.cuda(i));
            assertEquals(Device.cuda(i), devices.logical());
            assertEquals(Device.cuda(0), devices.physical());
        }
    }

    @Test
    void shouldRunADistinctCudaWorkerOnItsOwnGpu() {
        WorkerMain.Devices devices = devicesOf(options(DeviceKind.CUDA, 2, false), Device.cuda(1));
        assertEquals(Device.cuda(1), devices.logical());
        assertEquals(Device.cuda(1), devices.physical());
    }

    @Test
    void shouldKeepCpuWorkersOnTheirOwnDevice() {
        for (boolean sameDevice : new boolean[] {false, true}) {
            WorkerMain.Devices devices = devicesOf(options(DeviceKind.CPU, 4, sameDevice), Device.cpu(2));
            assertEquals(Device.cpu(2), devices.logical());
            assertEquals(Device.cpu(2), devices.physical());
        }
    }

    @Test
    void shouldReadACommandLineWithoutKindAsCpu() {
        Map<String, String> old = WorkerMain.parse(new String[] {"--socket", "s", "--device", "3", "--devices", "4", "--instance", "i",
            "--failures", "f", "--timeout-ms", "1000", "--same-device", "false"});
        assertEquals(new WorkerMain.Devices(Device.cpu(3), Device.cpu(3)), WorkerMain.Devices.of(old));
    }

    @Test
    void shouldRefuseAnUnknownKindAndACpuWorkerOnAnotherDevice() {
        List<String> args = new ArrayList<>(WorkerPool.arguments(options(DeviceKind.CPU, 2, false), Device.cpu(1), "i", "b", SOCKET));
        args.set(args.indexOf("--device-kind") + 1, "tpu");
        IllegalArgumentException kind = assertThrows(IllegalArgumentException.class,
            () -> WorkerMain.Devices.of(WorkerMain.parse(args.toArray(String[]::new))));
        assertTrue(kind.getMessage().contains("tpu"), kind.getMessage());
        args.set(args.indexOf("--device-kind") + 1, "cpu");
        args.set(args.indexOf("--physical-device") + 1, "0");
        IllegalArgumentException moved = assertThrows(IllegalArgumentException.class,
            () -> WorkerMain.Devices.of(WorkerMain.parse(args.toArray(String[]::new))));
        assertTrue(moved.getMessage().contains("--physical-device 0"), moved.getMessage());
    }

    @Test
    void shouldRefuseCudaWorkerProcessesWithTheCudaReasonWhereThereIsNoGpu() {
        Assumptions.assumeFalse(Cuda.isAvailable(), "CUDA is available: process mode on CUDA starts (the gpu tests run it)");
        CudaUnavailableException e = assertThrows(CudaUnavailableException.class,
            () -> EagerRuntime.start(options(DeviceKind.CUDA, 2, true)));
        assertTrue(e.getMessage().contains("cuda:0"), e.getMessage());
    }
}
