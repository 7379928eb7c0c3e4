package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every collective of {@link ThreadGroup} on c10d NCCL across distinct GPUs: one rank per GPU, each a
 * thread that made its GPU current, at world sizes 2 and 4; skipped with the count of visible GPUs where there are
 * fewer. Inputs and checks are {@link ThreadGroupCollectivesTest}'s, {@link ThreadGroupSharedCollectivesTest}'s and
 * {@link ThreadGroupP2PTest}'s, so results equal the CPU backends'; the shapes include splits that do not divide evenly.
 */
@GpuTest
class MultiGpuNcclCollectivesTest {

    @ParameterizedTest(name = "NCCL on {0} GPUs")
    @ValueSource(ints = {2, 4})
    void ncclShouldRunEveryCollectiveAcrossGpus(int world) {
        int visible = Cuda.deviceCount();
        Assumptions.assumeTrue(visible >= world, "needs " + world + " GPUs, " + visible + " visible");
        List<long[]> shapes = List.of(new long[] {2L * world, 2L * world}, new long[] {world + 1, 2, world + 2},
            new long[] {world + 1, 1027});
        try (ThreadGroupManager manager = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(120))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(300), rank -> onItsGpu(manager, world, rank, (group, gpu) -> {
                List<String> all = new ArrayList<>();
                for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Long)) {
                    for (long[] shape : shapes) {
                        all.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, dtype, shape, gpu));
                    }
                }
                all.addAll(ThreadGroupSharedCollectivesTest.runSharedCollectives(group, gpu));
                all.addAll(ThreadGroupP2PTest.runPointToPoint(group, gpu));
                return all;
            }));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList(), "world " + world);
        }
    }

    /**
     * On the calling rank thread: makes {@code cuda:rank} current, joins {@code manager}'s CUDA group of {@code world}
     * ranks, and returns {@code checks}' failures, with one more if the group is not on NCCL.
     */
    static List<String> onItsGpu(ThreadGroupManager manager, int world, int rank, BiFunction<ThreadGroup, Device, List<String>> checks) {
        Device gpu = Device.cuda(rank);
        Cuda.setCurrentDevice(gpu);
        ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, GroupFixtures.ids(world), rank);
        List<String> all = new ArrayList<>();
        if (!group.backendName().equals("nccl")) {
            all.add("rank " + rank + ": backend " + group.backendName());
        }
        all.addAll(checks.apply(group, gpu));
        return all;
    }
}
