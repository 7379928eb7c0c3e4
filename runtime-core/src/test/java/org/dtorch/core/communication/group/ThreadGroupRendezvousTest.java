package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousServer;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.ShmFiles;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Gloo groups of a manager given a rendezvous, with their ranks threads of this JVM (the cross-JVM cases are
 * {@code MultiNodeGroupsTest}): the failures name the group, the rank and the rendezvous, and leave the manager usable.
 */
@Timeout(60)
class ThreadGroupRendezvousTest {
    private static final Duration SHORT = Duration.ofSeconds(1);

    private static ThreadGroupManager worker(RendezvousAddress rendezvous, Duration timeout) {
        return new ThreadGroupManager(false, ShmFiles.freshInstance("tgr"), timeout, ThreadGroupManager.Role.WORKER, rendezvous);
    }

    @Test
    void shouldNameGroupRankAndRendezvousWhenAPeerNeverComesThenServeOtherGroups() {
        try (RendezvousServer server = RendezvousServer.start("127.0.0.1", 0);
             ThreadGroupManager groups = worker(server.address(), SHORT)) {
            assertEquals(server.address(), groups.rendezvous());
            long start = System.nanoTime();
            CommTimeoutException e = assertThrows(CommTimeoutException.class,
                () -> groups.getThreadGroup(DeviceKind.CPU, List.of(0L, 1L), 0));
            long millis = (System.nanoTime() - start) / 1_000_000;
            assertTrue(e.getMessage().startsWith("connect to group cpu[0, 1] (rank 0 of 2, gloo over the rendezvous " + server.address()
                + "): timed out after 1 s waiting for the other ranks"), e.getMessage());
            assertTrue(millis < 20_000, "failed after " + millis + " ms, not at its 1 s deadline"); // generous for a loaded machine

            List<Boolean> summed = RankThreads.run(2, Duration.ofSeconds(30), rank -> {
                ThreadGroup group = groups.getThreadGroup(DeviceKind.CPU, List.of(0L, 2L), rank * 2L);
                try (Tensor x = TestTensors.full(rank + 1f, 3); Tensor sum = group.allReduce(x, ReduceOpType.SUM);
                     Tensor expected = TestTensors.full(3f, 3)) {
                    return TestTensors.same(expected, sum);
                }
            });
            assertEquals(List.of(true, true), summed, "the manager's next group after the failure");
        }
    }

    @Test
    void shouldNameGroupRankAndRendezvousWhenNoServerAnswers() {
        RendezvousAddress gone;
        try (RendezvousServer server = RendezvousServer.start("127.0.0.1", 0)) {
            gone = server.address();
        }
        try (ThreadGroupManager groups = worker(gone, SHORT)) {
            CommException e = assertThrows(CommException.class, () -> groups.getThreadGroup(DeviceKind.CPU, List.of(0L, 1L), 1));
            assertTrue(e.getMessage().startsWith("connect to group cpu[0, 1] (rank 1 of 2, gloo over the rendezvous " + gone + ")"),
                e.getMessage());
            assertTrue(e.getMessage().contains("cannot reach the rendezvous " + gone), e.getMessage());
        }
    }

    @Test
    void shouldKeepTheFileStoreWithoutARendezvous() {
        try (ThreadGroupManager groups = new ThreadGroupManager(false, ShmFiles.freshInstance("tgr"), SHORT)) {
            assertNull(groups.rendezvous());
            ThreadGroup group = groups.getThreadGroup(DeviceKind.CPU, List.of(0L), 0);
            assertTrue(Files.exists(CommPaths.file(groups.initPath(group.key()), ".filestore")), "no FileStore for " + group.key());
        }
    }
}
