package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Timeout;

/** Every collective with its ranks in three JVM processes, on both backends. */
@Tag("multiprocess")
@Timeout(180)
class ThreadGroupProcessTest {

    /**
     * Every collective in two dtypes and an uneven shape, then large enough for Gloo's ring, then the per-rank
     * primitives, then every collective again with ranks that hold zero elements; the mismatches.
     */
    static List<String> runAll(ThreadGroup group) {
        List<String> failures = new ArrayList<>();
        failures.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, ScalarType.Float, new long[] {7, 5}));
        failures.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, ScalarType.Long, new long[] {4, 3, 6}));
        failures.addAll(GlooRingTest.reduceLarge(group)); // Gloo's ring between processes
        failures.addAll(ThreadGroupSharedCollectivesTest.runSharedCollectives(group, Device.cpu(0)));
        failures.addAll(ThreadGroupP2PTest.runPointToPoint(group, Device.cpu(0)));
        failures.addAll(ThreadGroupEmptyShardsTest.runWithEmptyShards(group, Device.cpu(0)));
        group.barrier();
        return failures;
    }

    @ParameterizedTest
    @EnumSource(GroupFixtures.Backend.class)
    void shouldRunEveryCollectiveAcrossProcesses(GroupFixtures.Backend backend) {
        int world = 3;
        String instance = ShmFiles.freshInstance("tgp");
        List<ChildJvm> children = new ArrayList<>();
        // Ranks 1 and 2 are other processes: this manager plays the controller's role (it owns the rendezvous files,
        // and its ranks do not all meet in it).
        try (ThreadGroupManager manager = new ThreadGroupManager(backend.sameDevice, instance, Duration.ofSeconds(60),
            ThreadGroupManager.Role.CONTROLLER)) {
            for (int rank = 1; rank < world; rank++) {
                children.add(ChildJvm.start("rank " + rank, GroupChild.class, Map.of(), instance, String.valueOf(backend.sameDevice),
                    String.valueOf(world), String.valueOf(rank)));
            }
            ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), 0);
            assertEquals(backend.sameDevice ? "same-device" : "gloo", group.backendName());
            assertEquals(List.of(), runAll(group));
            for (ChildJvm child : children) {
                child.awaitSuccess(Duration.ofSeconds(120));
            }
        } finally {
            children.forEach(ChildJvm::close);
        }
        assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
    }
}
