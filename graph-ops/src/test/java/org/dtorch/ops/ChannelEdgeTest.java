package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.ChannelEdge;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.promise.FutureFailedException;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Declared pipeline edges ({@link DTorch#channel}) between a 2-device source mesh and a 2-device destination mesh of a
 * 4-device runtime: values exactly torch's and the ordinary path's (a partial target too), the source running two transfers ahead of a held
 * destination and no further, 50 transfers in a row, undeclared edges on the ordinary path, a channel timeout failing
 * the operators with the channel's message, the refusals, and no shared memory left by a closed edge or runtime.
 */
@Timeout(120)
class ChannelEdgeTest {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    static DTorch dt;

    @TempDir
    Path tmp;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).build());
    }

    /** The runtime's close closes an edge left open, and its channel leaves no file behind. */
    @AfterAll
    static void stop() {
        String instance = dt.runtime().instanceId();
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        dt.channel(src, dst);
        try (DTensor x = dt.arange(0, 6, 1, torch.ScalarType.Long, src, S0); DTensor y = x.redistribute(dst, R); Tensor got = y.toTorch()) {
            assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L), values(got));
        }
        assertFalse(channelFiles(instance).isEmpty(), "an open edge has its control region");
        dt.close();
        assertEquals(List.of(), channelFiles(instance), "the runtime's close closed the open edge");
    }

    static List<String> channelFiles(String instance) {
        return ShmFiles.of(instance).stream().filter(n -> n.contains("-ch-")).toList();
    }

    static List<Long> values(Tensor t) {
        List<Long> out = new ArrayList<>();
        try (Tensor flat = t.flatten(0, -1).to(torch.ScalarType.Long)) {
            for (long i = 0; i < flat.numel(); i++) {
                out.add(flat.get(i).item_long());
            }
        }
        return out;
    }

    private static void assertSame(Tensor want, DTensor got, String what) {
        try (Tensor value = got.toTorch()) {
            assertTrue(torch.equal(want, value), what + ": got " + value + ", want " + want);
        }
    }

    @Test
    void shouldEqualTorchAndTheOrdinaryPathForShardAndReplicateTargets() {
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        torch.manual_seed(7);
        List<Placement[]> sources = List.of(new Placement[] {S0}, new Placement[] {S1}, new Placement[] {R});
        List<Placement[]> targets = List.of(new Placement[] {S0}, new Placement[] {S1}, new Placement[] {R},
            new Placement[] {Placement.partial()});
        try (Tensor whole = torch.randn(5, 3)) {
            List<DTensor> ordinary = new ArrayList<>();
            for (Placement[] s : sources) {
                for (Placement[] t : targets) {
                    try (DTensor x = dt.tensor(whole, src, s)) {
                        ordinary.add(x.redistribute(dst, t));
                    }
                }
            }
            try (ChannelEdge edge = dt.channel(src, dst)) {
                int i = 0;
                for (Placement[] s : sources) {
                    for (Placement[] t : targets) {
                        String what = List.of(s) + " -> " + List.of(t);
                        try (DTensor x = dt.tensor(whole, src, s); DTensor viaChannel = x.redistribute(dst, t); DTensor plain = ordinary.get(i++)) {
                            assertEquals(List.of(t), viaChannel.placements(), what);
                            assertSame(whole, viaChannel, what + " through the channel");
                            assertSame(whole, plain, what + " on the ordinary path");
                        }
                    }
                }
                assertEquals(12, edge.transfers());
            }
            // One device to three, each consumer copying its share of dimension 1.
            DeviceMesh one = dt.mesh(0);
            DeviceMesh three = dt.mesh(1, 2, 3);
            try (ChannelEdge edge = dt.channel(one, three); DTensor x = dt.tensor(whole, one); DTensor y = x.redistribute(three, S1)) {
                assertSame(whole, y, "one device to three, S(1)");
                assertEquals(1, edge.transfers());
            }
        }
    }

    /**
     * Empty shards cross a declared edge like any other: one row over two source devices (1, 0) to S(0), S(1) and R of
     * the destination, two rows to three consumers (1, 1, 0), and a tensor with no element; exactly torch's values.
     */
    @Test
    void shouldCarryEmptyShardsThroughADeclaredEdge() {
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        torch.manual_seed(9);
        try (Tensor row = torch.randn(1, 3); Tensor nothing = torch.randn(0, 3); ChannelEdge edge = dt.channel(src, dst)) {
            for (Tensor whole : List.of(row, nothing)) {
                for (Placement[] t : List.of(new Placement[] {S0}, new Placement[] {S1}, new Placement[] {R})) {
                    String what = java.util.Arrays.toString(whole.sizes().vec().get()) + " [S(0)] -> " + List.of(t);
                    try (DTensor x = dt.tensor(whole, src, S0); DTensor y = x.redistribute(dst, t)) {
                        assertEquals(List.of(t), y.placements(), what);
                        assertSame(whole, y, what);
                    }
                }
            }
            assertEquals(6, edge.transfers());
        }
        DeviceMesh one = dt.mesh(0);
        DeviceMesh three = dt.mesh(1, 2, 3);
        try (Tensor rows = torch.randn(2, 4); ChannelEdge edge = dt.channel(one, three); DTensor x = dt.tensor(rows, one);
             DTensor y = x.redistribute(three, S0)) {
            assertSame(rows, y, "two rows to three consumers");
            assertEquals(1, edge.transfers());
        }
    }

    @Test
    void shouldLetTheSourceRunTwoTransfersAheadOfAHeldDestinationAndNoFurther() throws IOException {
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        Path open = tmp.resolve("open");
        try (ChannelEdge edge = dt.channel(src, dst); DTensor probe = dt.zeros(new long[] {1}, dt.mesh(0));
             DTensor held = dt.zeros(new long[] {2}, dst); DTensor heldOut = dt.apply(new TestOps.Gate(open.toString(), 60_000), held);
             DTensor x = dt.arange(0, 8, 1, torch.ScalarType.Long, src, S0); DTensor m1 = x.redistribute(dst, S0); DTensor m2 = x.redistribute(dst, R)) {
            try (Tensor done = dt.getTensorAsync(probe).waitFor(Duration.ofSeconds(30))
                .orElseThrow(() -> new AssertionError("the source should publish two transfers while the destination is held"))) {
                assertEquals(List.of(0L), values(done));
            }
            try (DTensor m3 = x.redistribute(dst, S0)) {
                TensorFuture threeAhead = dt.getTensorAsync(probe);
                assertTrue(threeAhead.waitFor(Duration.ofMillis(300)).isEmpty(), "the third publish waits for a free slot");
                Files.createFile(open);
                threeAhead.get().close();
                for (DTensor m : List.of(m1, m2, m3)) {
                    try (Tensor got = m.toTorch()) {
                        assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L, 6L, 7L), values(got));
                    }
                }
            }
            assertEquals(3, edge.transfers());
        }
    }

    @Test
    void shouldTakeTheOrdinaryPathWhereNoEdgeIsDeclaredWhichMeetsTheHeldDestination() throws IOException {
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        DeviceMesh reversed = dt.mesh(3, 2);
        Path open = tmp.resolve("open");
        try (ChannelEdge edge = dt.channel(src, dst); DTensor probe = dt.zeros(new long[] {1}, dt.mesh(0));
             DTensor held = dt.zeros(new long[] {2}, dst); DTensor heldOut = dt.apply(new TestOps.Gate(open.toString(), 60_000), held);
             DTensor x = dt.arange(0, 4, 1, torch.ScalarType.Long, src, S0); DTensor other = x.redistribute(reversed, S0)) {
            TensorFuture after = dt.getTensorAsync(probe);
            assertTrue(after.waitFor(Duration.ofMillis(300)).isEmpty(), "the ordinary path meets the destination, which is held");
            Files.createFile(open);
            after.get().close();
            try (Tensor got = other.toTorch(); DTensor back = other.redistribute(src, R); Tensor backValue = back.toTorch()) {
                assertEquals(List.of(0L, 1L, 2L, 3L), values(got));
                assertEquals(List.of(0L, 1L, 2L, 3L), values(backValue));
            }
            assertEquals(0, edge.transfers(), "neither mesh pair is the declared edge");
        }
    }

    @Test
    void shouldCarryFiftyTransfersInARowInOrder() {
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        List<DTensor> moved = new ArrayList<>();
        try (ChannelEdge edge = dt.channel(src, dst)) {
            for (int i = 0; i < 50; i++) {
                try (DTensor x = dt.arange(i, i + 6, 1, torch.ScalarType.Long, src, S0)) {
                    moved.add(x.redistribute(dst, i % 2 == 0 ? S0 : R));
                }
            }
            for (int i = 0; i < 50; i++) {
                try (DTensor m = moved.get(i); Tensor got = m.toTorch()) {
                    long b = i;
                    assertEquals(List.of(b, b + 1, b + 2, b + 3, b + 4, b + 5), values(got), "transfer " + i);
                }
            }
            assertEquals(50, edge.transfers());
        }
    }

    @Test
    void shouldFailTheOperatorsWithTheChannelsMessageWhenItTimesOutAndStayUsable() throws IOException {
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        Path open = tmp.resolve("open");
        String instance = dt.runtime().instanceId();
        List<DTensor> moved = new ArrayList<>();
        try (ChannelEdge edge = dt.channel(src, dst, Duration.ofMillis(500)); DTensor held = dt.zeros(new long[] {2}, dst);
             DTensor heldOut = dt.apply(new TestOps.Gate(open.toString(), 60_000), held);
             DTensor x = dt.arange(0, 4, 1, torch.ScalarType.Long, src, S0)) {
            for (int i = 0; i < 3; i++) {
                moved.add(x.redistribute(dst, R));
            }
            try (DTensor probe = dt.zeros(new long[] {1}, dt.mesh(0))) {
                // Device 0 runs the probe once its third publish timed out.
                dt.getTensorAsync(probe).waitFor(Duration.ofSeconds(30)).ifPresent(Tensor::close);
            }
            Files.createFile(open);
            FutureFailedException e = assertThrows(FutureFailedException.class, () -> moved.get(2).toTorchAsync().get());
            assertTrue(e.getMessage().contains("channel '" + edge.options().name() + "'") && e.getMessage().contains("timed out"), e.getMessage());
        } finally {
            moved.forEach(DTensor::close);
        }
        assertEquals(List.of(), channelFiles(instance), "a failed channel is removed too");
        try (DTensor x = dt.arange(0, 4, 1, torch.ScalarType.Long, src, S0); DTensor y = x.redistribute(dst, R); Tensor got = y.toTorch()) {
            assertEquals(List.of(0L, 1L, 2L, 3L), values(got), "the runtime still works");
        }
    }

    @Test
    void shouldRefuseOverlappingMeshesAndASecondDeclarationAndRemoveAClosedEdgesFiles() {
        DeviceMesh src = dt.mesh(0, 1);
        DeviceMesh dst = dt.mesh(2, 3);
        String instance = dt.runtime().instanceId();
        String overlap = assertThrows(IllegalArgumentException.class, () -> dt.channel(src, dt.mesh(1, 2))).getMessage();
        assertTrue(overlap.contains("disjoint") && overlap.contains("device 1"), overlap);
        try (ChannelEdge edge = dt.channel(src, dst)) {
            String twice = assertThrows(IllegalStateException.class, () -> dt.channel(src, dst)).getMessage();
            assertTrue(twice.contains("declared already"), twice);
            assertEquals(1, channelFiles(instance).size(), "one control region: " + channelFiles(instance));
            try (DTensor x = dt.arange(0, 4, 1, torch.ScalarType.Long, src, S0); DTensor y = x.redistribute(dst, S0); Tensor got = y.toTorch()) {
                assertEquals(List.of(0L, 1L, 2L, 3L), values(got));
            }
            edge.close();
            assertEquals(List.of(), channelFiles(instance), "a closed edge leaves no file");
        }
        try (ChannelEdge again = dt.channel(src, dst); DTensor x = dt.arange(0, 4, 1, torch.ScalarType.Long, src, R);
             DTensor y = x.redistribute(dst, S0); Tensor got = y.toTorch()) {
            assertEquals(List.of(0L, 1L, 2L, 3L), values(got), "an edge declared again after its close");
            assertEquals(1, again.transfers());
        }
    }
}
