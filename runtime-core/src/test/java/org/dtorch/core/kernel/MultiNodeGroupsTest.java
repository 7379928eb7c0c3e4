package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.nio.file.Files;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.store.HostIdentity;
import org.dtorch.core.communication.store.RendezvousServer;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * c10d groups and operation stores across two "nodes" on 127.0.0.1: this JVM is node 0 (its own host identity) and one
 * child JVM with {@code -Ddtorch.host.id=node-1} is node 1, each with two CPU devices on threads and a worker's
 * {@code ThreadGroupManager} given the rendezvous this test serves. Every collective runs on Gloo over the rendezvous
 * (nothing of the FileStore), then operation stores and transfers ({@link MultiNodeChild}).
 */
@Tag("multinode")
@Timeout(180)
class MultiNodeGroupsTest {
    private static final Duration STARTUP = Duration.ofSeconds(120);

    @Test
    void shouldRunEveryCollectiveSubGroupAndTransferAcrossTwoNodesOfTwoDevices() {
        String instance = ShmFiles.freshInstance("mng");
        try (RendezvousServer server = RendezvousServer.start("127.0.0.1", 0);
             ChildJvm node1 = ChildJvm.start("node 1", MultiNodeChild.class, Map.of(HostIdentity.HOST_ID_PROPERTY, "node-1"),
                 server.address().toString(), instance, "1")) {
            assertEquals(List.of(), MultiNodeChild.runNode(server.address(), instance, 0));
            node1.awaitSuccess(STARTUP);
            assertEquals("OK", node1.awaitLine("OK", Duration.ofSeconds(5)));
        }
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
        assertFalse(Files.exists(CommPaths.root().resolve(instance)), "a group met in a FileStore rather than at the rendezvous");
    }
}
