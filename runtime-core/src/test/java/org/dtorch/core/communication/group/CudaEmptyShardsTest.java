package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Empty shards on CUDA: every collective of {@link ThreadGroupEmptyShardsTest} (dimensions shorter than the group,
 * tensors with no element, a 6 MiB tensor with an empty shard, zero-size concatenations and messages) with the
 * same-device backend's ranks on one GPU, the halo exchange over heights shorter than the group, and c10d NCCL at world
 * size 1 (NCCL refuses two ranks on one GPU) on tensors with no element. Skipped without a CUDA device.
 */
@GpuTest
class CudaEmptyShardsTest {

    @ParameterizedTest(name = "same-device on cuda:0, world={0}")
    @ValueSource(ints = {2, 3, 4})
    void sameDeviceBackendShouldRunEveryCollectiveWithEmptyShards(int world) {
        try (ThreadGroupManager manager = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(150), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, GroupFixtures.ids(world), rank);
                assertEquals("same-device", group.backendName());
                return ThreadGroupEmptyShardsTest.runWithEmptyShards(group, Device.cuda(0));
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList(), "world " + world);
        }
    }

    @Test
    void sameDeviceBackendShouldTakeHaloRowsPastEmptyShards() {
        // Convolutions of integer-valued float32 are compared exactly, so not in TF32 (cuDNN's default).
        boolean tf32 = torch.globalContext().allowTF32CuDNN();
        torch.globalContext().setAllowTF32CuDNN(false);
        try (ThreadGroupManager manager = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<List<String>> failures = RankThreads.run(4, Duration.ofSeconds(120), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, GroupFixtures.ids(4), rank);
                List<String> all = new ArrayList<>();
                for (long height : new long[] {2, 3}) {
                    all.addAll(HaloExchangeTest.haloedConvolutionsMatch(group, height == 3, Device.cuda(0), height));
                }
                return all;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        } finally {
            torch.globalContext().setAllowTF32CuDNN(tf32);
        }
    }

    @Test
    void ncclShouldRunEveryCollectiveOnTensorsWithNoElementAtWorldSizeOne() {
        try (ThreadGroupManager manager = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<List<String>> failures = RankThreads.run(1, Duration.ofSeconds(120), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, List.of(0L), rank);
                assertEquals("nccl", group.backendName());
                return ThreadGroupEmptyShardsTest.runWithEmptyShards(group, Device.cuda(0));
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }
}
