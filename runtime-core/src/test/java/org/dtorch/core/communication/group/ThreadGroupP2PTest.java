package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.dtorch.core.communication.group.GroupFixtures.rejected;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Point-to-point transfers ({@code send}, {@code recv}, {@code batchIsendIrecv}) between rank threads of both
 * backends: every received tensor equals, exactly, the tensor its sender made (torch on one device); bad input fails
 * before anything is issued; a receive whose sender never comes fails within the group's timeout naming peer and shape.
 */
@Timeout(60)
class ThreadGroupP2PTest {

    /** What rank {@code from} sends in message {@code n}: small integers, distinct per sender and message. */
    private static Tensor message(long from, int n, ScalarType dtype, long... shape) {
        return TestTensors.pattern(shape, dtype, 7 * from + n, 13, from);
    }

    /** Every backend with 2 ranks (left and right are the same peer) and with 4. */
    static Stream<Arguments> backendsAndWorlds() {
        return Stream.of(Backend.values()).flatMap(b -> Stream.of(Arguments.of(b, 2), Arguments.of(b, 4)));
    }

    @ParameterizedTest
    @MethodSource("backendsAndWorlds")
    void shouldPassTensorsBetweenPairsAndAroundARing(Backend backend, int world) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(world,
                rank -> runPointToPoint(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank), Device.cpu(0)));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
            // Per rank: a send, a receive and one batch.
            assertEquals(3L * world, manager.collectiveCounter().count(CollectiveKind.POINT_TO_POINT));
        }
    }

    /**
     * Blocking pairs (0, 1), (2, 3), ... (a rank without partner sits out), then one batch around the ring both ways
     * with two messages to the right (kept in order) and one into a non-contiguous view; tensors on {@code device},
     * compared with what the sender made. The mismatches; every rank calls it, in threads or processes.
     */
    static List<String> runPointToPoint(ThreadGroup group, Device device) {
        int world = group.getWorldSize();
        int rank = group.getRank();
        ThreadGroupCollectivesTest.Checker check = new ThreadGroupCollectivesTest.Checker(rank);
        int partner = rank ^ 1;
        if (partner < world) {
            // The even rank sends first, the odd rank receives first.
            try (Tensor mine = on(device, message(rank, 0, ScalarType.Float, 3, 4)); Tensor theirs = message(partner, 0, ScalarType.Float, 3, 4);
                 Tensor into = on(device, TestTensors.full(-1f, 3, 4))) {
                if (rank % 2 == 0) {
                    group.send(mine, partner);
                    group.recv(into, partner);
                } else {
                    group.recv(into, partner);
                    group.send(mine, partner);
                }
                check.equal("send/recv from rank " + partner, theirs, into, false);
            }
        }
        int right = (rank + 1) % world;
        int left = (rank + world - 1) % world;
        try (Tensor first = on(device, message(rank, 1, ScalarType.Long, 2, 5)); Tensor second = on(device, message(rank, 2, ScalarType.Long, 2, 5));
             Tensor back = on(device, message(rank, 3, ScalarType.Float, 4, 2));
             Tensor fromLeft1 = on(device, TestTensors.full(0f, 2, 5).to(ScalarType.Long));
             Tensor fromLeft2 = on(device, TestTensors.full(0f, 2, 5).to(ScalarType.Long));
             Tensor storage = on(device, TestTensors.full(0f, 2, 4)); Tensor fromRight = storage.t()) {
            // Messages between two ranks match in the order each issues them; with two ranks left and right are the
            // same peer, so every rank sends first, second, back and receives them in that order.
            P2PWork work = group.batchIsendIrecv(List.of(P2POp.irecv(fromLeft1, left), P2POp.isend(first, right),
                P2POp.isend(second, right), P2POp.irecv(fromLeft2, left), P2POp.isend(back, left), P2POp.irecv(fromRight, right)));
            work.await();
            work.await();
            check.that("batch done", work.isDone(), "not done after await");
            try (Tensor e1 = message(left, 1, ScalarType.Long, 2, 5); Tensor e2 = message(left, 2, ScalarType.Long, 2, 5);
                 Tensor e3 = message(right, 3, ScalarType.Float, 4, 2); Tensor got3 = fromRight.contiguous()) {
                check.equal("batch first from the left", e1, fromLeft1, false);
                check.equal("batch second from the left", e2, fromLeft2, false);
                check.equal("batch from the right into a view", e3, got3, false);
            }
        }
        return check.failures;
    }

    private static Tensor on(Device device, Tensor t) {
        return ThreadGroupCollectivesTest.onDevice(t, device);
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldRejectBadPeersBeforeIssuingAnything(Backend backend) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> messages = RankThreads.run(2, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank);
                List<String> seen = new ArrayList<>();
                int peer = 1 - rank;
                try (Tensor x = message(rank, 0, ScalarType.Float, 4); Tensor into = TestTensors.full(0f, 4)) {
                    seen.add(rejected(() -> group.send(x, rank)));
                    seen.add(rejected(() -> group.recv(into, 2)));
                    seen.add(rejected(() -> group.batchIsendIrecv(List.of())));
                    // The valid first op is not issued: the batch fails as a whole.
                    seen.add(rejected(() -> group.batchIsendIrecv(List.of(P2POp.isend(x, peer), P2POp.irecv(new Tensor(), peer)))));
                    // Nothing was issued: a transfer still matches.
                    group.batchIsendIrecv(List.of(P2POp.isend(x, peer), P2POp.irecv(into, peer))).await();
                    try (Tensor expected = message(peer, 0, ScalarType.Float, 4)) {
                        seen.add(TestTensors.same(expected, into) ? "usable" : "unusable: " + TestTensors.diff(expected, into));
                    }
                }
                return seen;
            });
            List<String> rank1 = messages.get(1);
            assertTrue(rank1.get(0).startsWith("send on group cpu[0, 1] (rank 1 of 2"), rank1.get(0));
            assertTrue(rank1.get(0).contains("peer rank 1 of float32[4] on cpu must be another rank of the group, in [0, 2) but not 1"),
                rank1.get(0));
            assertTrue(rank1.get(1).contains("peer rank 2 of float32[4] on cpu"), rank1.get(1));
            assertTrue(rank1.get(2).contains("no operations"), rank1.get(2));
            assertTrue(rank1.get(3).contains("an undefined tensor"), rank1.get(3));
            assertEquals("usable", messages.get(0).get(4));
            assertEquals("usable", rank1.get(4));
        }
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void shouldTimeOutNamingThePeerAndShapeWhenNothingIsSent(Backend backend) {
        // The deadline also covers creating the group (a Gloo connection): long enough for a loaded machine.
        Duration timeout = Duration.ofSeconds(backend == Backend.GLOO ? 4 : 1);
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, timeout)) {
            List<ThreadGroup> groups = RankThreads.run(2, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank));
            ThreadGroup lonely = groups.get(0);
            try (Tensor into = TestTensors.full(0f, 4, 2)) {
                CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> lonely.recv(into, 1));
                assertTrue(e.getMessage().startsWith("recv(into float32[4, 2] on cpu from rank 1) on group cpu[0, 1] (rank 0 of 2, "
                    + lonely.backendName() + "): "), e.getMessage());
                assertTrue(e.getMessage().contains("timed out after " + timeout.toSeconds() + " s"), e.getMessage());
                CommException poisoned = assertThrows(CommException.class, () -> lonely.send(into, 1));
                assertTrue(poisoned.getMessage().contains("unusable after an earlier communication failure"), poisoned.getMessage());
            }
        }
    }

    @Test
    void shouldFailTheReceiverOfAnotherShapeOnTheSameDeviceBackend() {
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.SAME_DEVICE, Duration.ofSeconds(20))) {
            List<String> outcomes = RankThreads.run(2, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank);
                try (Tensor x = message(rank, 0, ScalarType.Float, 5); Tensor into = TestTensors.full(0f, 4)) {
                    if (rank == 0) {
                        group.send(x, 1);
                        return "sent";
                    }
                    return rejected(() -> group.recv(into, 0));
                }
            });
            assertEquals("sent", outcomes.get(0));
            assertTrue(outcomes.get(1).contains("rank 0 sent float32[5] on cpu but rank 1 receives into float32[4] on cpu"), outcomes.get(1));
        }
    }
}
