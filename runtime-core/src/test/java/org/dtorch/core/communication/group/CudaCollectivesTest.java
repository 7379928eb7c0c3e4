package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every collective on CUDA: the same-device backend with 1 to 4 ranks on one GPU (DTorch's single-GPU
 * simulation), and c10d NCCL at world size 1 (NCCL refuses two ranks on one GPU; more GPUs are the multi-GPU
 * issue's). Inputs and checks are {@link ThreadGroupCollectivesTest}'s (and, for the per-rank primitives,
 * {@link ThreadGroupSharedCollectivesTest}'s and {@link ThreadGroupP2PTest}'s), so results equal the CPU backends'.
 */
@GpuTest
class CudaCollectivesTest {

    static Stream<Arguments> configurations() {
        List<Arguments> all = new ArrayList<>();
        for (int world = 1; world <= 4; world++) {
            for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Long)) {
                all.add(Arguments.of(world, dtype, "even", new long[] {2L * world, 2L * world}));
                all.add(Arguments.of(world, dtype, "uneven-3d", new long[] {world + 1, 2, world + 2}));
                // Fewer 16-byte units than ranks for bfloat16 (the fused all-reduce's rank 0 takes all), and a size
                // whose elements do not fill whole units (a tail the last rank adds element by element).
                all.add(Arguments.of(world, dtype, "square", new long[] {world, world}));
                all.add(Arguments.of(world, dtype, "odd", new long[] {world + 1, 1027}));
            }
        }
        return all.stream();
    }

    @ParameterizedTest(name = "same-device on cuda:0, world={0} {1} {2}")
    @MethodSource("configurations")
    void sameDeviceBackendShouldMatchTorch(int world, ScalarType dtype, String shapeName, long[] shape) {
        try (ThreadGroupManager manager = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<Long> ids = GroupFixtures.ids(world);
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(120), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, ids, rank);
                assertEquals("same-device", group.backendName());
                return ThreadGroupCollectivesTest.runEveryCollective(group, dtype, shape, Device.cuda(0));
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList(),
                "world " + world + " " + TorchTensors.dtypeName(dtype) + " " + Arrays.toString(shape));
        }
    }

    @ParameterizedTest(name = "per-rank primitives, same-device on cuda:0, world={0}")
    @org.junit.jupiter.params.provider.ValueSource(ints = {2, 3})
    void sameDeviceBackendShouldRunThePerRankPrimitives(int world) {
        try (ThreadGroupManager manager = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(120), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, GroupFixtures.ids(world), rank);
                List<String> all = new ArrayList<>(ThreadGroupSharedCollectivesTest.runSharedCollectives(group, Device.cuda(0)));
                all.addAll(ThreadGroupP2PTest.runPointToPoint(group, Device.cuda(0)));
                return all;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList(), "world " + world);
        }
    }

    @ParameterizedTest(name = "TeleFuser's helpers, same-device on cuda:0, world={0}")
    @org.junit.jupiter.params.provider.ValueSource(ints = {2, 3})
    void sameDeviceBackendShouldRunRingUlyssesHaloAndPipelineHelpers(int world) {
        // Convolutions of integer-valued float32 are compared exactly, so not in TF32 (cuDNN's default).
        boolean tf32 = torch.globalContext().allowTF32CuDNN();
        torch.globalContext().setAllowTF32CuDNN(false);
        try (ThreadGroupManager manager = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(120), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, GroupFixtures.ids(world), rank);
                List<String> all = new ArrayList<>();
                for (boolean causal : new boolean[] {false, true}) {
                    all.addAll(RingAttentionTest.equalsFullAttention(group, causal, Device.cuda(0)));
                }
                all.addAll(UlyssesCommTest.scatterAndGatherMatch(group, Device.cuda(0)));
                for (boolean channelsLast : new boolean[] {false, true}) {
                    all.addAll(HaloExchangeTest.haloedConvolutionsMatch(group, channelsLast, Device.cuda(0)));
                }
                all.addAll(PipelineP2PCommTest.bothWaysInOneBatch(new PipelineP2PComm(group), Device.cuda(0)));
                return all;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList(), "world " + world);
        } finally {
            torch.globalContext().setAllowTF32CuDNN(tf32);
        }
    }

    @Test
    void ncclShouldRunEveryCollectiveAtWorldSizeOne() {
        try (ThreadGroupManager manager = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            List<List<String>> failures = RankThreads.run(1, Duration.ofSeconds(120), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CUDA, List.of(0L), rank);
                assertEquals("nccl", group.backendName());
                List<String> all = new ArrayList<>();
                for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.BFloat16, ScalarType.Long)) {
                    all.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, dtype, new long[] {3, 5}, Device.cuda(0)));
                }
                return all;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }
}
