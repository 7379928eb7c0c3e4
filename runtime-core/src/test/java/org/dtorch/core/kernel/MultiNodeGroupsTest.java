package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.store.HostIdentity;
import org.dtorch.core.communication.store.RendezvousServer;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * c10d groups and operation stores across two "nodes" on 127.0.0.1: this JVM is node 0 (its own host identity), with
 * devices 0 and 1 on threads; node 1 ({@code -Ddtorch.host.id=node-1}) is two child JVMs with one device each (2 and 3),
 * as a multi-node run has one worker process per device. Each JVM has a worker's {@code ThreadGroupManager} given the
 * rendezvous this test serves. Every collective runs on Gloo over the rendezvous (no FileStore), then operation stores
 * (Network, Memory within node 0, File within node 1) and transfers ({@link MultiNodeChild}).
 */
@Tag("multinode")
@Timeout(180)
class MultiNodeGroupsTest {
    private static final Duration STARTUP = Duration.ofSeconds(120);

    @Test
    void shouldRunEveryCollectiveSubGroupAndTransferAcrossTwoNodesOfTwoDevices() throws IOException {
        String instance = ShmFiles.freshInstance("mng");
        try (RendezvousServer server = RendezvousServer.start("127.0.0.1", 0);
             ChildJvm device2 = node1(server, instance, 2); ChildJvm device3 = node1(server, instance, 3)) {
            assertEquals(List.of(), MultiNodeChild.runNode(server.address(), instance, 0, List.of(0L, 1L)));
            for (ChildJvm child : List.of(device2, device3)) {
                child.awaitSuccess(STARTUP);
                assertEquals("OK", child.awaitLine("OK", Duration.ofSeconds(5)));
            }
        }
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
        Path files = CommPaths.root().resolve(instance);
        if (Files.exists(files)) {
            try (Stream<Path> all = Files.walk(files)) {
                assertEquals(List.of(), all.filter(p -> p.toString().endsWith(".filestore")).toList(),
                    "a group met in a FileStore rather than at the rendezvous");
            }
        }
    }

    private static ChildJvm node1(RendezvousServer server, String instance, long device) {
        return ChildJvm.start("node 1, device " + device, MultiNodeChild.class, Map.of(HostIdentity.HOST_ID_PROPERTY, "node-1"),
            server.address().toString(), instance, "1", String.valueOf(device));
    }
}
