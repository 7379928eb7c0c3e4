package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The buckets of {@code allReduceSum_}: tensors of one dtype fill a bucket in order up to its size, larger ones go alone;
 * and many gradients of mixed dtypes, shapes and layouts (non-contiguous views, an empty tensor, one larger than a
 * bucket) summed in place over three Gloo rank threads, each against torch's sum of the ranks' inputs.
 */
@Timeout(60)
class ReductionBucketsTest {
    private static final int WORLD = 3;

    @Test
    void shouldFillBucketsPerDtypeInOrderAndKeepLargeTensorsAlone() {
        try (Tensor a = torch.zeros(4); Tensor b = torch.zeros(new long[] {4}, new org.bytedeco.pytorch.TensorOptions(ScalarType.Long));
             Tensor c = torch.zeros(2); Tensor big = torch.zeros(64); Tensor d = torch.zeros(3); Tensor e = torch.zeros(1)) {
            // 32-byte buckets: the longs (32 bytes) and the 64 floats go alone; the floats a, c and d (36 bytes) close a
            // bucket; e is left in an open one, which comes last.
            List<List<Integer>> buckets = ReductionBuckets.of(new Tensor[] {a, b, c, big, d, e}, 32);
            assertEquals(List.of(List.of(1), List.of(3), List.of(0, 2, 4), List.of(5)), buckets);
            assertEquals(List.of(List.of(0), List.of(1), List.of(2)), ReductionBuckets.of(new Tensor[] {a, b, c}, 0), "0: no buckets");
        }
    }

    @Test
    void shouldRefuseABucketSizeThatIsNotAWholeNumberOfMiB() {
        String before = System.getProperty(ReductionBuckets.BUCKET_PROPERTY);
        try {
            for (String bad : new String[] {"-1", "2.5", "many"}) {
                System.setProperty(ReductionBuckets.BUCKET_PROPERTY, bad);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, ReductionBuckets::bucketBytes);
                assertTrue(e.getMessage().contains(ReductionBuckets.BUCKET_PROPERTY) && e.getMessage().contains(bad), e.getMessage());
            }
            System.setProperty(ReductionBuckets.BUCKET_PROPERTY, "0");
            assertEquals(0, ReductionBuckets.bucketBytes());
        } finally {
            restore(before);
        }
    }

    private static void restore(String before) {
        if (before == null) {
            System.clearProperty(ReductionBuckets.BUCKET_PROPERTY);
        } else {
            System.setProperty(ReductionBuckets.BUCKET_PROPERTY, before);
        }
    }

    @Test
    void shouldSumManyMixedTensorsInPlaceThroughBuckets() {
        String before = System.getProperty(ReductionBuckets.BUCKET_PROPERTY);
        System.setProperty(ReductionBuckets.BUCKET_PROPERTY, "1");
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(WORLD, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(WORLD), rank);
                return sumMixed(group, rank);
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        } finally {
            restore(before);
        }
    }

    /** Shapes and dtypes of the gradients: small ones share buckets, a 2 MiB one goes alone, an empty one is harmless. */
    private static final long[][] SHAPES = {{5, 3}, {7}, {0, 4}, {512, 1024}, {3, 4}, {6, 2}, {1}};
    private static final ScalarType[] DTYPES = {ScalarType.Float, ScalarType.Double, ScalarType.Float, ScalarType.Float,
        ScalarType.Long, ScalarType.Float, ScalarType.Double};

    private static List<String> sumMixed(ThreadGroup group, int rank) {
        ThreadGroupCollectivesTest.Checker check = new ThreadGroupCollectivesTest.Checker(rank);
        List<Tensor> mine = new ArrayList<>();
        List<Tensor> expected = new ArrayList<>();
        List<Tensor> targets = new ArrayList<>();
        for (int i = 0; i < SHAPES.length; i++) {
            int k = i;
            List<Tensor> all = GroupFixtures.perRank(WORLD, r -> TestTensors.pattern(SHAPES[k], DTYPES[k], 3L * r + k, 7, r));
            expected.add(GroupFixtures.reference(all, ReduceOpType.SUM));
            Tensor own = all.get(rank).clone();
            mine.add(own);
            targets.add(own);
            all.forEach(Tensor::close);
        }
        // Tensor 4 is summed through a non-contiguous view of its memory.
        try (Tensor transposed = mine.get(4).t().contiguous(); Tensor view = transposed.t()) {
            targets.set(4, view);
            group.allReduceSum_(targets.toArray(Tensor[]::new));
            for (int i = 0; i < SHAPES.length; i++) {
                Tensor got = i == 4 ? view.contiguous() : mine.get(i);
                check.equal("bucketed sum of tensor " + i + " " + DTYPES[i], expected.get(i), got, false);
                if (i == 4) {
                    got.close();
                }
            }
        }
        mine.forEach(Tensor::close);
        expected.forEach(Tensor::close);
        return check.failures;
    }
}
