package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.shm.Processes;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The rank table over a control region in plain native memory: joining, leaving, the last one alive, a dead peer. */
class FileStorePeersTest {
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment region = arena.allocate(REGION_LENGTH, PAGE_SIZE);

    @AfterEach
    void freeRegion() {
        arena.close();
    }

    @Test
    void shouldRefuseASecondLiveInstanceOfARankAndFindTheLastOneAlive() {
        FileStorePeers peers = new FileStorePeers(region, 2);
        peers.join(0, "s");
        IllegalStateException twice = assertThrows(IllegalStateException.class, () -> peers.join(0, "s"));
        assertEquals("store 's': rank 0 is already open in process " + Processes.currentPid(), twice.getMessage());
        assertTrue(peers.noOtherAlive(0));
        peers.join(1, "s");
        assertFalse(peers.noOtherAlive(0));
        peers.leave(1);
        assertTrue(peers.noOtherAlive(0));
        assertArrayEquals(new int[] {Processes.currentPid(), Processes.currentPid()}, peers.pids(), "a pid stays after leaving");
        peers.checkAlive("op", () -> "seen");
    }

    @Test
    void shouldNameAParticipantThatDiedWithoutClosing() throws Exception {
        Process exited = new ProcessBuilder("true").start();
        exited.waitFor();
        int deadPid = (int) exited.pid();
        region.set(ValueLayout.JAVA_INT, pidOffset(1), deadPid);
        region.set(ValueLayout.JAVA_BYTE, openOffset(1), (byte) 1);
        FileStorePeers peers = new FileStorePeers(region, 2);
        CommException e = assertThrows(CommException.class, () -> peers.checkAlive("destGet('x')", () -> "nothing yet"));
        assertEquals("destGet('x'): participant rank 1 (pid " + deadPid + ") exited without closing the store; nothing yet",
            e.getMessage());
        assertTrue(peers.noOtherAlive(0), "a dead participant does not keep the region alive");
    }
}
