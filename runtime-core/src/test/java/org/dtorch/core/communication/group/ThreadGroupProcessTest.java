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
import org.junit.jupiter.api.Test;
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

    /**
     * Both backends with the same two child JVMs, one backend after the other: a child runs its rank of the Gloo group,
     * closes that group's manager and then runs its rank of the same-device group, as the parent does, so that the test
     * starts two JVMs, not two per backend. Each backend has a runtime instance (and rendezvous files) of its own.
     */
    @Test
    void shouldRunEveryCollectiveAcrossProcessesOnBothBackends() {
        int world = 3;
        List<GroupFixtures.Backend> backends = List.of(GroupFixtures.Backend.values());
        List<String> instances = backends.stream().map(b -> ShmFiles.freshInstance("tgp")).toList();
        List<ThreadGroupManager> managers = new ArrayList<>();
        List<ChildJvm> children = new ArrayList<>();
        try {
            // Ranks 1 and 2 are other processes: these managers play the controller's role (they own the rendezvous
            // files, and their ranks do not all meet in them). They stay open until the children are done with them.
            for (int b = 0; b < backends.size(); b++) {
                managers.add(new ThreadGroupManager(backends.get(b).sameDevice, instances.get(b), Duration.ofSeconds(60),
                    ThreadGroupManager.Role.CONTROLLER));
            }
            for (int rank = 1; rank < world; rank++) {
                List<String> args = new ArrayList<>(List.of(String.valueOf(world), String.valueOf(rank)));
                for (int b = 0; b < backends.size(); b++) {
                    args.add(instances.get(b));
                    args.add(String.valueOf(backends.get(b).sameDevice));
                }
                children.add(ChildJvm.start("rank " + rank, GroupChild.class, Map.of(), args.toArray(String[]::new)));
            }
            for (int b = 0; b < backends.size(); b++) {
                ThreadGroup group = managers.get(b).getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), 0);
                assertEquals(backends.get(b).sameDevice ? "same-device" : "gloo", group.backendName());
                assertEquals(List.of(), runAll(group), backends.get(b).toString());
            }
            for (ChildJvm child : children) {
                child.awaitSuccess(Duration.ofSeconds(120));
            }
        } finally {
            children.forEach(ChildJvm::close);
            managers.forEach(ThreadGroupManager::close);
        }
        for (String instance : instances) {
            assertEquals(List.of(), ShmFiles.of(instance), "shared memory left behind");
        }
    }
}
