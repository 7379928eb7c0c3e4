package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;

/**
 * The layout in which uneven shards travel through c10d's equal-sized collectives: each rank's rows padded to the
 * largest shard and trimmed back, compared with torch's own slicing and concatenation of the full tensor; and the
 * all-to-all's split sizes, which must agree pairwise between every sender and receiver.
 */
class UnevenShardsTest {

    @Test
    void shouldPadEachRanksRowsToTheLargestShard() {
        long[] sizes = {2, 2, 1};
        try (Tensor x = TestTensors.pattern(new long[] {5, 3}, ScalarType.Float, 0, 97, 1);
             Tensor padded = UnevenShards.padEach(x, sizes);
             Tensor ranks01 = x.narrow(0, 0, 4); Tensor rank2 = x.narrow(0, 4, 1); Tensor zeroRow = torch.zeros(1, 3);
             Tensor expected = cat(ranks01, rank2, zeroRow)) {
            assertArrayEquals(new long[] {6, 3}, TorchTensors.shape(padded));
            assertTrue(TestTensors.same(expected, padded), TestTensors.diff(expected, padded));
        }
    }

    @Test
    void shouldPassEqualShardsThroughWithoutACopy() {
        try (Tensor x = TestTensors.pattern(new long[] {4, 2}, ScalarType.Float, 0, 97, 1)) {
            assertSame(x, UnevenShards.padEach(x, new long[] {2, 2}));
            assertSame(x, UnevenShards.padTo(x, 4));
        }
    }

    @Test
    void shouldPadGatherInputsAndTrimTheGatheredRowsBackToEachRank() {
        for (int world : new int[] {2, 3, 4}) {
            for (long rows : new long[] {0, 1, 2, 3, 7}) {
                long[] sizes = BalancedSplit.sizes(rows, world);
                long max = CollectiveShapes.max(sizes);
                long[] offsets = CollectiveShapes.offsets(sizes);
                try (Tensor full = TestTensors.pattern(new long[] {rows, 2}, ScalarType.Long, 3, 1000, 0)) {
                    List<Tensor> padded = new ArrayList<>();
                    for (int r = 0; r < world; r++) {
                        try (Tensor rowsOfRank = full.narrow(0, offsets[r], sizes[r]); Tensor shard = rowsOfRank.contiguous()) {
                            Tensor p = UnevenShards.padTo(shard, max);
                            padded.add(p == shard ? shard.clone() : p);
                        }
                    }
                    try (Tensor gathered = cat(padded.toArray(Tensor[]::new))) {
                        assertEquals(max * world, gathered.size(0), world + " ranks, " + rows + " rows: one slot of " + max + " each");
                        List<Tensor> pieces = UnevenShards.trim(gathered, sizes);
                        try (Tensor back = cat(pieces.toArray(Tensor[]::new))) {
                            assertTrue(TestTensors.same(full, back), world + " ranks, " + rows + " rows: " + TestTensors.diff(full, back));
                        }
                        for (int r = 0; r < world; r++) {
                            assertEquals(sizes[r], pieces.get(r).size(0), "rank " + r + "'s rows");
                        }
                        pieces.forEach(Tensor::close);
                    }
                    padded.forEach(Tensor::close);
                }
            }
        }
    }

    @Test
    void shouldSplitAnAllToAllSoThatEverySenderAndReceiverAgree() {
        long[][] globals = {{7, 5}, {2, 9, 3}, {4, 4}, {0, 6}};
        for (long[] global : globals) {
            for (int world : new int[] {2, 3, 4}) {
                for (int[] dims : new int[][] {{0, 1}, {1, 0}}) {
                    int srcDim = dims[0];
                    int destDim = dims[1];
                    long[] srcSizes = BalancedSplit.sizes(global[srcDim], world);
                    long[] destSizes = BalancedSplit.sizes(global[destDim], world);
                    long[][] send = new long[world][];
                    long[][] receive = new long[world][];
                    for (int r = 0; r < world; r++) {
                        long[] local = CollectiveShapes.withDim(global, srcDim, srcSizes[r]);
                        send[r] = UnevenShards.sendSplits(local, destDim, destSizes);
                        receive[r] = UnevenShards.receiveSplits(local, srcDim, destDim, srcSizes, destSizes, r);
                        assertEquals(CollectiveShapes.numel(local), CollectiveShapes.sum(send[r]), "rank " + r + " sends its whole input");
                        long[] out = CollectiveShapes.withDim(CollectiveShapes.withDim(global, destDim, destSizes[r]), srcDim, global[srcDim]);
                        assertEquals(CollectiveShapes.numel(out), CollectiveShapes.sum(receive[r]), "rank " + r + " receives its whole output");
                    }
                    for (int s = 0; s < world; s++) {
                        for (int r = 0; r < world; r++) {
                            assertEquals(send[s][r], receive[r][s], java.util.Arrays.toString(global) + " over " + world + ", dims " + srcDim
                                + " to " + destDim + ": rank " + s + " sends rank " + r + " what it expects");
                        }
                    }
                }
            }
        }
    }

    private static Tensor cat(Tensor... parts) {
        try (TensorVector vector = new TensorVector(parts); TensorArrayRef ref = new TensorArrayRef(vector)) {
            return torch.cat(ref, 0);
        }
    }
}
