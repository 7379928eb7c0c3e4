package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.dtorch.core.communication.group.GroupFixtures.rejected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.CudaUnavailableException;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Bad input fails before any communication and leaves the group usable; lost peers time out clearly. */
@Timeout(90)
class ThreadGroupFailureTest {


    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldRejectBadInputBeforeCommunicatingAndStayUsable(Backend backend) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> messages = RankThreads.run(2, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank);
                try (Tensor x = TestTensors.pattern(new long[] {5, 3}, ScalarType.Float, rank, 7, 0);
                     Tensor ints = TestTensors.pattern(new long[] {4}, ScalarType.Long, 0, 7, 0);
                     Tensor tiny = TestTensors.pattern(new long[] {1, 3}, ScalarType.Float, 0, 7, 0)) {
                    List<String> seen = List.of(
                        rejected(() -> group.allGather(x, 2, 10)),
                        rejected(() -> group.allGather(x, 0, 7)),
                        rejected(() -> group.allGatherIntoTensor(x, 1)),
                        rejected(() -> group.allReduce(ints, ReduceOpType.AVG)),
                        rejected(() -> group.allReduce(null)),
                        rejected(() -> group.allReduce(x, null)),
                        rejected(() -> group.allToAll(x, 0, 0, 10)),
                        rejected(() -> group.allToAll(x, 0, 5, 10)),
                        rejected(() -> group.reduceScatterTensor(tiny, 2, ReduceOpType.SUM)),
                        rejected(() -> group.replicateToShard(tiny, 3)),
                        rejected(() -> group.equalShapeAllGatherIntoTensor(new Tensor())));
                    // Nothing moved: the group still works.
                    try (Tensor sum = group.allReduce(x)) {
                        if (sum.size(0) != 5) {
                            throw new AssertionError("unexpected result " + TestTensors.values(sum));
                        }
                    }
                    return seen;
                }
            });
            List<String> rank1 = messages.get(1);
            assertTrue(rank1.get(0).startsWith("allGather on group cpu[0, 1] (rank 1 of 2"), rank1.get(0));
            assertTrue(rank1.get(0).contains("shard dim 2 is out of range for input float32[5, 3] on cpu (valid: 0..1)"), rank1.get(0));
            assertTrue(rank1.get(1).contains("rank 1's balanced share of 7 over 2 ranks is 3 (shares: [4, 3])"), rank1.get(1));
            // A dimension shorter than the group is split with empty shares: rank 1's share of 1 row is none.
            assertTrue(rank1.get(2).contains("rank 1's balanced share of 1 over 2 ranks is 0 (shares: [1, 0])"), rank1.get(2));
            assertTrue(rank1.get(3).contains("AVG needs a floating-point input, got int64[4] on cpu"), rank1.get(3));
            assertTrue(rank1.get(4).contains("input is null"), rank1.get(4));
            assertTrue(rank1.get(5).contains("reduce op is null"), rank1.get(5));
            assertTrue(rank1.get(6).contains("srcDim and destDim are both 0"), rank1.get(6));
            assertTrue(rank1.get(7).contains("destDim 5 is out of range"), rank1.get(7));
            assertTrue(rank1.get(8).contains("scatter dim 2 is out of range for input float32[1, 3]"), rank1.get(8));
            assertTrue(rank1.get(9).contains("shardDim 3 is out of range for input float32[1, 3]"), rank1.get(9));
            assertTrue(rank1.get(10).contains("an undefined tensor"), rank1.get(10));
        }
    }

    @Test
    void shouldReportRanksThatDisagreeOnShapeOnEveryRank() {
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.SAME_DEVICE, Duration.ofSeconds(20))) {
            List<String> messages = RankThreads.run(2, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank);
                try (Tensor x = TestTensors.pattern(new long[] {2, 2 + rank}, ScalarType.Float, 0, 7, 0)) {
                    String message = rejected(() -> group.allReduce(x));
                    try (Tensor ok = TestTensors.pattern(new long[] {2, 2}, ScalarType.Float, 0, 7, 0); Tensor sum = group.allReduce(ok)) {
                        return message;
                    }
                }
            });
            assertTrue(messages.get(0).contains("ranks disagree: rank 0 has float32[2, 2] on cpu, rank 1 has float32[2, 3] on cpu"), messages.get(0));
        }
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldTimeOutNamingTheGroupWhenAPeerNeverArrives(Backend backend) {
        // The deadline also covers creating the group: for Gloo a connection (and, first in a JVM, loading its natives), long
        // enough for a loaded machine; the same-device group is a store in this process's memory, made at once.
        long seconds = backend == Backend.GLOO ? 4 : 1;
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(seconds))) {
            List<ThreadGroup> groups = RankThreads.run(2, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank));
            ThreadGroup lonely = groups.get(0);
            try (Tensor x = TestTensors.full(1f, 4)) {
                CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> lonely.allReduce(x));
                String expectedStart = "allReduce(sum) on group cpu[0, 1] (rank 0 of 2, " + lonely.backendName() + "): ";
                assertTrue(e.getMessage().startsWith(expectedStart), e.getMessage());
                assertTrue(e.getMessage().contains("timed out after " + seconds + " s"), e.getMessage());
                if (backend == Backend.SAME_DEVICE) {
                    assertTrue(e.getMessage().contains("destGet('1/in/1') on store '" + manager.instanceId() + "/same-cpu-0_1'"), e.getMessage());
                    assertTrue(e.getMessage().contains("no producer set this key"), e.getMessage());
                }
                CommException poisoned = assertThrows(CommException.class, () -> lonely.allReduce(x));
                assertTrue(poisoned.getMessage().contains("unusable after an earlier communication failure"), poisoned.getMessage());
            }
        }
    }

    @Test
    void shouldRejectStreamsOfAnotherKindAndGpuGroups() {
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.SAME_DEVICE, Duration.ofSeconds(5))) {
            ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, List.of(7L), 7);
            group.setStream(DeviceStream.of(Device.cpu(7)));
            assertEquals(7, group.getGlobalDeviceId());
            if (!Cuda.isAvailable()) {
                CudaUnavailableException gpu = assertThrows(CudaUnavailableException.class,
                    () -> new ThreadGroup("x/gpu", DeviceKind.CUDA, List.of(0L, 1L), 0, 2, false));
                assertTrue(gpu.getMessage().contains("cuda:0 is not usable"), gpu.getMessage());
            }
            assertThrows(IllegalArgumentException.class, () -> new ThreadGroup("x/bad", DeviceKind.CPU, List.of(0L, 1L), 2, 2, false));
            assertThrows(IllegalArgumentException.class, () -> new ThreadGroup("x/bad", DeviceKind.CPU, List.of(0L, 1L), 0, 3, false));
            assertThrows(IllegalArgumentException.class, () -> new ThreadGroup(" ", DeviceKind.CPU, List.of(0L), 0, 1, false));
        }
    }

    @Test
    void shouldFailWhenInterruptedInASameDeviceCollective() throws Exception {
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.SAME_DEVICE, Duration.ofSeconds(30))) {
            List<ThreadGroup> groups = RankThreads.run(2, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank));
            java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
            Thread waiter = Thread.ofPlatform().start(() -> {
                try (Tensor x = TestTensors.full(1f, 4)) {
                    groups.get(0).allReduce(x);
                } catch (Throwable e) {
                    failure.set(e);
                }
            });
            Await.asleep(waiter); // inside the collective, waiting for rank 1
            waiter.interrupt();
            waiter.join(5000);
            assertInstanceOf(org.dtorch.core.communication.CommInterruptedException.class, failure.get());
        }
    }
}
