package org.dtorch.core.runtime.process;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.device.Device;
import org.dtorch.core.graph.LogicalGraph;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.RuntimeOptions;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.UnsafePathException;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The control socket is bound only in a directory the runtime just made, owner-only. */
@Timeout(120)
class WorkerPoolTest {
    private static final int OTHER_UID = 65534;

    @Test
    void shouldRefuseASocketDirectoryThatAnotherUserMadeFirst() throws Exception {
        String instance = ShmFiles.freshInstance("pool");
        Path planted = SharedRegion.directory().resolve(SharedRegion.PREFIX + instance + "-ctl");
        Files.createDirectory(planted);
        Files.setAttribute(planted, "unix:mode", 0777);
        Files.setAttribute(planted, "unix:uid", OTHER_UID);
        WorkerProcess.Events ignored = new WorkerProcess.Events() {
            @Override
            public void operatorFailed(WorkerProcess worker, Operator op, FailureKind kind, String text) {
            }

            @Override
            public void exited(WorkerProcess worker, int status, String fatal) {
            }
        };
        try {
            CommException e = assertThrows(CommException.class, () -> WorkerPool.start(
                RuntimeOptions.defaults().withDeviceCount(1).withPerDevicePerProcess(true), List.of(Device.cpu(0)), instance,
                SharedRegion.PREFIX + instance + "-failures", new LogicalGraph(operand -> { }),
                new OperatorEncoder(SharedRegion.PREFIX + instance), ignored));
            assertInstanceOf(UnsafePathException.class, e.getCause(), e.getMessage());
            assertTrue(e.getMessage().contains(planted.toString()) && e.getMessage().contains("exists already"), e.getMessage());
            assertTrue(Files.isDirectory(planted), "what another user made is not removed");
        } finally {
            Files.deleteIfExists(planted.resolve("sock"));
            Files.deleteIfExists(planted);
        }
    }
}
