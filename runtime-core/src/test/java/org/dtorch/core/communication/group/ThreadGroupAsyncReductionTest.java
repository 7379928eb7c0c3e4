package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link ThreadGroup#allReduceSumAsync_}: the sums of an issued reduction arrive while the rank runs other collectives of
 * the group, equal to the synchronous reduction's; a reduction a peer never joins fails at its await within the
 * deadline, naming the group, the rank and the tensors, and leaves the group refusing further calls.
 */
@Timeout(120)
class ThreadGroupAsyncReductionTest {
    private static final int WORLD = 4;

    /** Rank {@code rank}'s tensors: two small ones and one of 2 MiB, which the 1 MiB buckets keep apart. */
    private static List<Tensor> tensorsOf(int rank) {
        return List.of(TestTensors.pattern(new long[] {5, 3}, ScalarType.Float, rank, 7, 0),
            TestTensors.pattern(new long[] {17}, ScalarType.Float, rank, 5, 1),
            TestTensors.pattern(new long[] {512, 1024}, ScalarType.Float, rank, 11, 2));
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldSumInTheBackgroundWhileTheRankRunsOtherCollectives(Backend backend) {
        String before = System.getProperty(ReductionBuckets.BUCKET_PROPERTY);
        System.setProperty(ReductionBuckets.BUCKET_PROPERTY, "1");
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(60))) {
            List<List<Tensor>> results = RankThreads.run(WORLD, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(WORLD), rank);
                List<Tensor> mine = tensorsOf(rank);
                List<Tensor> sums = new ArrayList<>();
                for (Tensor t : mine) {
                    sums.add(t.clone());
                }
                ReductionWork work = group.allReduceSumAsync_(sums.toArray(Tensor[]::new));
                try (Tensor other = TestTensors.full(rank + 1f, 6); Tensor otherSum = group.allReduce(other)) {
                    if (otherSum.sum().item_double() != 6 * (1 + 2 + 3 + 4)) {
                        throw new AssertionError("the collective issued meanwhile summed to " + TestTensors.values(otherSum));
                    }
                }
                work.await();
                work.await(); // a second await returns at once
                assertTrue(work.isDone());
                mine.forEach(Tensor::close);
                return sums;
            });
            for (int i = 0; i < 3; i++) {
                List<Tensor> inputs = new ArrayList<>();
                for (int r = 0; r < WORLD; r++) {
                    inputs.add(tensorsOf(r).get(i));
                }
                try (Tensor want = GroupFixtures.reference(inputs, ReduceOpType.SUM)) {
                    for (int r = 0; r < WORLD; r++) {
                        assertTrue(torch.allclose(want, results.get(r).get(i)), "tensor " + i + " on rank " + r + " (" + backend + ")");
                        assertTrue(torch.equal(results.get(0).get(i), results.get(r).get(i)), "every rank holds the same sum");
                    }
                }
                inputs.forEach(Tensor::close);
            }
            results.forEach(list -> list.forEach(Tensor::close));
        } finally {
            if (before == null) {
                System.clearProperty(ReductionBuckets.BUCKET_PROPERTY);
            } else {
                System.setProperty(ReductionBuckets.BUCKET_PROPERTY, before);
            }
        }
    }

    @Test
    void shouldFailAtTheAwaitNamingTheTensorsWhenAPeerNeverIssues() {
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.GLOO, Duration.ofSeconds(4))) {
            List<ThreadGroup> groups = RankThreads.run(2, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank));
            ThreadGroup lonely = groups.get(0);
            try (Tensor x = TestTensors.full(1f, 4); Tensor y = TestTensors.full(2f, 3)) {
                ReductionWork work = lonely.allReduceSumAsync_(x, y);
                assertTrue(work.describe().contains("2 tensor(s) of 28 bytes"), work.describe());
                CommTimeoutException e = assertThrows(CommTimeoutException.class, work::await);
                String waited = "wait allReduce(sum) (allReduceSumAsync_ of 2 tensor(s), 28 bytes) on group cpu[0, 1] (rank 0 of 2, gloo): ";
                assertTrue(e.getMessage().startsWith(waited), e.getMessage());
                assertTrue(e.getMessage().contains("timed out"), e.getMessage());
                assertEquals(e, assertThrows(CommTimeoutException.class, work::await), "a later await rethrows the failure");
                CommException poisoned = assertThrows(CommException.class, () -> lonely.allReduceSumAsync_(x));
                assertTrue(poisoned.getMessage().contains("unusable after an earlier communication failure"), poisoned.getMessage());
            }
        }
    }
}
