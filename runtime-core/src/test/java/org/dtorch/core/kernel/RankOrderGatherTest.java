package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The S(d) to R step on four rank threads of both backends: every rank's result equals the whole tensor exactly, for
 * equal shares on the first, a middle and the last dim (the stacked gather) and uneven shares (the uneven gather), from
 * contiguous and non-contiguous shards; one all-gather per call; a shard of the wrong size is refused before anything
 * moves and the group stays usable. The gathers also run on {@code cuda:0} (GPU suite).
 */
@Timeout(60)
class RankOrderGatherTest {
    private static final int WORLD = 4;
    /** Dims 0 and 2 split evenly over 4 ranks, dim 1 (6 over 4: 2, 2, 1, 1) does not. */
    private static final long[] SHAPE = {8, 6, 12};

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void shouldGatherEveryDimInRankOrder(boolean sameDevice) {
        gatherEveryDim(sameDevice, DeviceKind.CPU, Device.cpu(0));
    }

    /** The same on {@code cuda:0} with the same-device backend: the view and reshape of a CUDA allocation. */
    @Test
    @GpuTest
    void shouldGatherEveryDimInRankOrderOnCuda() {
        gatherEveryDim(true, DeviceKind.CUDA, Device.cuda(0));
    }

    /** Every rank's gather of every dim, from contiguous and strided shards on {@code device}, against the whole tensor. */
    private static void gatherEveryDim(boolean sameDevice, DeviceKind kind, Device device) {
        try (ThreadGroupManager groups = new ThreadGroupManager(sameDevice, GlobalCommInstanceId.next(), Duration.ofSeconds(20));
             Tensor whole = TestTensors.pattern(SHAPE, ScalarType.Float, 0, 1000, 0); Tensor placed = TorchTensors.to(whole, device)) {
            List<Long> ids = List.of(0L, 1L, 2L, 3L);
            List<List<String>> failures = RankThreads.run(WORLD, rank -> {
                ThreadGroup group = groups.getThreadGroup(kind, ids, rank);
                List<String> wrong = new ArrayList<>();
                for (int dim = 0; dim < SHAPE.length; dim++) {
                    for (boolean strided : new boolean[] {false, true}) {
                        String what = "dim " + dim + (strided ? " strided" : "") + " rank " + rank;
                        try (Tensor local = shard(placed, dim, rank, strided);
                             Tensor gathered = RankOrderGather.gather(group, local, dim, SHAPE[dim]);
                             Tensor onHost = TorchTensors.to(gathered, Device.cpu(0))) {
                            if (!TestTensors.same(whole, onHost) || !gathered.is_contiguous()) {
                                wrong.add(what + ": " + TestTensors.diff(whole, onHost) + ", contiguous " + gathered.is_contiguous());
                            }
                        }
                    }
                }
                return wrong;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
            assertEquals(WORLD * SHAPE.length * 2L, groups.collectiveCounter().count(CollectiveKind.ALL_GATHER));
        }
    }

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void shouldRefuseAShardThatIsNotTheRanksShareBeforeCommunicating(boolean sameDevice) {
        try (ThreadGroupManager groups = new ThreadGroupManager(sameDevice, GlobalCommInstanceId.next(), Duration.ofSeconds(20));
             Tensor whole = TestTensors.pattern(SHAPE, ScalarType.Float, 0, 1000, 0)) {
            List<Long> ids = List.of(0L, 1L, 2L, 3L);
            List<String> messages = RankThreads.run(WORLD, rank -> {
                ThreadGroup group = groups.getThreadGroup(DeviceKind.CPU, ids, rank);
                String message;
                // Ranks 0 to 2 claim 4 rows of dim 0 in all (equal shares of 1, but they hold 2); rank 3 holds rank 0's share
                // of dim 1 (2 of the uneven 2, 2, 1, 1).
                int dim = rank == 3 ? 1 : 0;
                try (Tensor bad = shard(whole, dim, rank == 3 ? 0 : rank, false)) {
                    long gathered = rank == 3 ? SHAPE[1] : WORLD;
                    message = assertThrows(IllegalArgumentException.class, () -> RankOrderGather.gather(group, bad, dim, gathered)).getMessage();
                }
                try (Tensor local = shard(whole, 0, rank, false); Tensor gathered = RankOrderGather.gather(group, local, 0, SHAPE[0])) {
                    assertTrue(TestTensors.same(whole, gathered), TestTensors.diff(whole, gathered));
                }
                return message;
            });
            for (String message : messages) {
                assertTrue(message.contains("balanced share"), message);
            }
            assertEquals(WORLD, groups.collectiveCounter().count(CollectiveKind.ALL_GATHER));
        }
    }

    /**
     * Rank {@code rank}'s balanced share of {@code whole} on {@code dim}, contiguous or with its last two dims' strides
     * swapped (not contiguous unless one of them has size 1).
     */
    private static Tensor shard(Tensor whole, int dim, int rank, boolean strided) {
        long size = whole.size(dim);
        try (Tensor view = whole.narrow(dim, BalancedSplit.offset(size, WORLD, rank), BalancedSplit.size(size, WORLD, rank))) {
            if (!strided) {
                return view.contiguous();
            }
            try (Tensor swapped = view.transpose(1, 2); Tensor packed = swapped.contiguous()) {
                return packed.transpose(1, 2);
            }
        }
    }
}
