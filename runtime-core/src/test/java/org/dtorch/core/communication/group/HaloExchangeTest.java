package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.dtorch.core.communication.group.GroupFixtures.rejected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The halo exchange on real rank threads over Gloo and the same-device backend, 2 and 3 ranks, uneven heights: each
 * rank's haloed shard equals, exactly, torch's zero-padded whole tensor cut at its rows, and a convolution of every
 * haloed shard with no padding in height, concatenated over the ranks, equals torch's padded convolution of the whole
 * tensor (integer-valued float32, so exact whatever the kernels' summation order); the memory format is kept, the
 * buffers are reused while the shape holds, bad input fails on every rank before anything is sent.
 */
@Timeout(60)
class HaloExchangeTest {
    private static final long HEIGHT = 7;
    private static final long[] SHAPE = {2, 2, HEIGHT, 5};

    @ParameterizedTest(name = "{0} world={1} channelsLast={2}")
    @CsvSource({"GLOO, 2, false", "GLOO, 3, true", "SAME_DEVICE, 2, true", "SAME_DEVICE, 3, false", "GLOO, 1, true"})
    void shouldGiveEveryRankTheRowsOfItsNeighboursSoThatConvolutionsMatchTorch(Backend backend, int world, boolean channelsLast) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(world,
                rank -> haloedConvolutionsMatch(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank), channelsLast, Device.cpu(0)));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
            // One batch per exchange on a rank with neighbours; checkConvolution's allGatherCat counts as gathers.
            assertEquals(world == 1 ? 0 : 3L * world, manager.collectiveCounter().count(CollectiveKind.POINT_TO_POINT));
        }
    }

    /**
     * Heights shorter than the group (the last ranks hold no row, and their halos come from ranks further up) and halos
     * taller than a neighbour's share (a halo of 2 over shares of 1 reaches the rank past the neighbour): the haloed
     * shards and the convolutions still match torch on the whole tensor.
     */
    @ParameterizedTest(name = "{0} world={1} height={2}")
    @CsvSource({"GLOO, 4, 2", "GLOO, 3, 1", "GLOO, 4, 5", "SAME_DEVICE, 4, 2", "SAME_DEVICE, 4, 3", "SAME_DEVICE, 3, 1"})
    void shouldTakeHaloRowsFromWhicheverRanksHoldThem(Backend backend, int world, long height) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(world, rank -> haloedConvolutionsMatch(
                manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank), rank % 2 == 0, Device.cpu(0), height));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    /**
     * One rank's halo exchanges on {@code device} (kernel 5, then kernel 3 twice, so the second halo-1 call reuses the
     * buffers): every haloed shard and the convolution of the shards against torch on the whole tensor on the CPU.
     */
    static List<String> haloedConvolutionsMatch(ThreadGroup group, boolean channelsLast, Device device) {
        return haloedConvolutionsMatch(group, channelsLast, device, HEIGHT);
    }

    /**
     * {@link #haloedConvolutionsMatch(ThreadGroup, boolean, Device)} on a tensor {@code height} rows tall: shorter than
     * the group gives the last ranks no row, whose halos then come from ranks further up.
     */
    static List<String> haloedConvolutionsMatch(ThreadGroup group, boolean channelsLast, Device device, long height) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        List<String> failed = new ArrayList<>();
        long[] shape = {SHAPE[0], SHAPE[1], height, SHAPE[3]};
        try (HaloExchange halos = new HaloExchange(group);
             Tensor full = TestTensors.pattern(shape, ScalarType.Float, 3, 7, -3);
             Tensor shard = ThreadGroupCollectivesTest.onDevice(ThreadGroupCollectivesTest.shardOf(full, 2, world, rank), device);
             Tensor local = channelsLast ? shard.contiguous(torch.MemoryFormat.ChannelsLast) : shard.clone()) {
            for (int kernel : new int[] {5, 3, 3}) {
                int halo = kernel / 2;
                try (Tensor haloed = halos.exchange(local, height, halo)) {
                    checkHaloed(failed, full, haloed, world, rank, halo, channelsLast);
                    checkConvolution(failed, group, full, haloed, kernel);
                }
            }
            long expected = world == 1 ? 0 : 2;
            if (halos.allocations() != expected) {
                failed.add("rank " + rank + ": buffers allocated " + halos.allocations() + " times, expected " + expected);
            }
        }
        return failed;
    }

    /** {@code haloed} is rank {@code rank}'s rows of the whole tensor zero-padded by {@code halo}, in the input's format. */
    private static void checkHaloed(List<String> failed, Tensor full, Tensor haloed, int world, int rank, int halo, boolean channelsLast) {
        String what = "rank " + rank + " halo " + halo;
        long height = full.size(2);
        long rows = BalancedSplit.size(height, world, rank) + 2L * halo;
        try (Tensor padded = torch.constant_pad_nd(full, 0, 0, halo, halo);
             Tensor expected = padded.narrow(2, BalancedSplit.offset(height, world, rank), rows);
             Tensor host = TorchTensors.to(haloed, Device.cpu(0))) {
            if (!TestTensors.same(expected, host)) {
                failed.add(what + ": " + TestTensors.diff(expected, host));
            }
        }
        boolean isChannelsLast = haloed.is_contiguous(torch.MemoryFormat.ChannelsLast);
        // A shard with no row has every memory format, and libtorch suggests the contiguous one for it.
        boolean emptyShard = BalancedSplit.size(height, world, rank) == 0;
        if (!emptyShard && channelsLast != isChannelsLast || !channelsLast && !haloed.is_contiguous()) {
            failed.add(what + ": channels-last input " + channelsLast + " gave a channels-last result " + isChannelsLast);
        }
    }

    /** conv2d of every rank's {@code haloed} (no height padding), concatenated in rank order, equals torch's on the whole tensor. */
    private static void checkConvolution(List<String> failed, ThreadGroup group, Tensor full, Tensor haloed, int kernel) {
        int pad = kernel / 2;
        long[] stride = {1, 1};
        long[] dilation = {1, 1};
        Device device = TorchTensors.device(haloed);
        try (Tensor weight = TestTensors.pattern(new long[] {3, 2, kernel, kernel}, ScalarType.Float, 1, 5, -2);
             Tensor bias = TestTensors.pattern(new long[] {3}, ScalarType.Float, 0, 3, 0);
             TensorOptional biasOpt = new TensorOptional(bias);
             Tensor expected = torch.conv2d(full, weight, biasOpt, stride, new long[] {pad, pad}, dilation, 1);
             Tensor deviceWeight = TorchTensors.to(weight, device); Tensor deviceBias = TorchTensors.to(bias, device);
             TensorOptional deviceBiasOpt = new TensorOptional(deviceBias);
             Tensor local = convolveRows(haloed, deviceWeight, deviceBiasOpt, pad);
             Tensor gatheredOnDevice = group.allGatherCat(local, 2); Tensor gathered = TorchTensors.to(gatheredOnDevice, Device.cpu(0))) {
            if (!TestTensors.same(expected, gathered)) {
                failed.add("rank " + group.getRank() + " conv2d kernel " + kernel + ": " + TestTensors.diff(expected, gathered));
            }
        }
    }

    /**
     * conv2d of {@code haloed} with no padding in height and {@code pad} in width. A rank with no row of its own has
     * exactly the kernel's height less one, and libtorch refuses a convolution with no output row: it convolves one zero
     * row more and keeps none of the result.
     */
    private static Tensor convolveRows(Tensor haloed, Tensor weight, TensorOptional bias, int pad) {
        long[] stride = {1, 1};
        long[] dilation = {1, 1};
        if (haloed.size(2) > 2L * pad) {
            return torch.conv2d(haloed, weight, bias, stride, new long[] {0, pad}, dilation, 1);
        }
        try (Tensor taller = torch.constant_pad_nd(haloed, 0, 0, 0, 1);
             Tensor one = torch.conv2d(taller, weight, bias, stride, new long[] {0, pad}, dilation, 1);
             Tensor none = one.narrow(2, 0, 0)) {
            return none.contiguous();
        }
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldRefuseBadHalosAndHeightsOnEveryRankBeforeCommunicating(Backend backend) {
        int world = 3;
        long height = 5;
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            RankThreads.runAll(world, rank -> {
                try (HaloExchange halos = new HaloExchange(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank));
                     Tensor local = TestTensors.full(1f, 1, 1, BalancedSplit.size(height, world, rank), 4);
                     Tensor flat = TestTensors.full(1f, 2, 4); Tensor tall = TestTensors.full(1f, 1, 1, 3, 4)) {
                    String where = "HaloExchange.exchange (rank " + rank + " of 3): ";
                    assertEquals(where + "the halo must be non-negative, got -1", rejected(() -> halos.exchange(local, height, -1)));
                    assertEquals(where + "the height must be non-negative, got -1", rejected(() -> halos.exchange(local, -1, 1)));
                    assertTrue(rejected(() -> halos.exchange(flat, height, 1)).startsWith(where + "input must be [N, C, H, W]"));
                    assertTrue(rejected(() -> halos.exchange(tall, height, 1)).contains("has 3 rows, but rank " + rank
                        + "'s balanced share of the height 5 is " + BalancedSplit.size(height, world, rank)));
                    assertTrue(rejected(() -> halos.exchange(local, 2, 1)).contains("balanced share of the height 2 is "
                        + BalancedSplit.size(2, world, rank) + " (shares: [1, 1, 0])"));
                    // Nothing was sent, so the group still works.
                    try (Tensor haloed = halos.exchange(local, height, 1)) {
                        assertEquals(local.size(2) + 2, haloed.size(2));
                    }
                }
            });
        }
    }
}
