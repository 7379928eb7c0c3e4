package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.LongStream;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(90)
class ThreadGroupManagerTest {

    @Test
    void shouldReturnTheCachedInstancePerRank() {
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.GLOO, Duration.ofSeconds(20))) {
            List<Long> ids = List.of(3L, 1L, 2L);
            List<ThreadGroup> first = RankThreads.run(3, rank -> manager.getThreadGroup(DeviceKind.CPU, ids, ids.get(rank)));
            List<ThreadGroup> second = RankThreads.run(3, rank -> manager.getThreadGroup(DeviceKind.CPU, ids, ids.get(rank)));
            for (int rank = 0; rank < 3; rank++) {
                assertSame(first.get(rank), second.get(rank));
                assertEquals(rank, first.get(rank).getRank());
                assertEquals(ids.get(rank), first.get(rank).getGlobalDeviceId());
                assertEquals("gloo", first.get(rank).backendName());
            }
            assertNotSame(first.get(0), first.get(1));
            assertEquals(List.of(new ThreadGroupKey(DeviceKind.CPU, ids)), manager.keys());
        }
    }

    @Test
    void shouldDestroyGroupsInSortedKeyOrderAndRemoveRendezvousFiles() {
        ThreadGroupManager manager = GroupFixtures.manager(Backend.GLOO, Duration.ofSeconds(20));
        List<List<Long>> created = List.of(List.of(2L, 3L), List.of(0L, 1L, 2L, 3L), List.of(1L, 3L), List.of(0L, 1L));
        List<ThreadGroup> all = new ArrayList<>();
        for (List<Long> ids : created) {
            all.addAll(RankThreads.run(ids.size(), rank -> manager.getThreadGroup(DeviceKind.CPU, ids, ids.get(rank))));
        }
        Path instanceDir = CommPaths.root().resolve(manager.instanceId());
        assertTrue(Files.isDirectory(instanceDir), "rendezvous files live under " + instanceDir);
        manager.close();
        List<String> order = manager.destructionOrder().stream().map(ThreadGroupKey::sortKey).toList();
        assertEquals(List.of("cpu:0,1", "cpu:0,1,2,3", "cpu:1,3", "cpu:2,3"), order);
        all.forEach(g -> assertTrue(g.isClosed()));
        assertFalse(Files.exists(instanceDir), "close() must remove " + instanceDir);
        manager.close(); // idempotent
        IllegalStateException e = assertThrows(IllegalStateException.class,
            () -> manager.getThreadGroup(DeviceKind.CPU, List.of(0L), 0));
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
    }

    @Test
    void shouldRejectBadDeviceLists() {
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.SAME_DEVICE, Duration.ofSeconds(5))) {
            assertTrue(assertThrows(IllegalArgumentException.class, () -> manager.getThreadGroup(DeviceKind.CPU, List.of(0L, 1L), 5))
                .getMessage().contains("device 5 is not in group cpu[0, 1]"));
            assertThrows(IllegalArgumentException.class, () -> manager.getThreadGroup(DeviceKind.CPU, List.of(0L, 0L), 0));
            assertThrows(IllegalArgumentException.class, () -> manager.getThreadGroup(DeviceKind.CPU, List.of(), 0));
        }
    }

    @Test
    void shouldAcceptGroupsOfMoreThanTwelveDevices() {
        int world = 13;
        List<Long> ids = LongStream.range(0, world).boxed().toList();
        try (ThreadGroupManager manager = GroupFixtures.manager(Backend.SAME_DEVICE, Duration.ofSeconds(20))) {
            List<Float> sums = RankThreads.run(world, rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, ids, rank);
                try (Tensor x = TestTensors.full(rank, 3); Tensor sum = group.allReduce(x); Tensor first = sum.select(0, 0)) {
                    return first.item_float();
                }
            });
            sums.forEach(s -> assertEquals(78f, s));
            assertTrue(manager.initPath(new ThreadGroupKey(DeviceKind.CPU, LongStream.range(0, 64).boxed().toList())).length() < 120);
        }
    }
}
