package org.dtorch.core.communication.store;

import static org.dtorch.core.communication.store.FileStoreLayout.openOffset;
import static org.dtorch.core.communication.store.FileStoreLayout.pidOffset;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.function.Supplier;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.shm.Processes;

/**
 * The participants of a {@link FileTensorStore} as its control region records them ({@link FileStoreLayout}: a
 * pid and an open flag per rank): joining, leaving, and whether a participant died without closing. A pid is
 * kept after its rank closes, for the same-process check ({@link TensorStore#createForParticipants}).
 *
 * <p>Not thread-safe: every method is called with the store's monitor lock held.
 */
final class FileStorePeers {
    private final MemorySegment seg;
    private final int worldSize;

    FileStorePeers(MemorySegment controlRegion, int worldSize) {
        this.seg = controlRegion;
        this.worldSize = worldSize;
    }

    /**
     * Records {@code rank} as open in this process; throws naming {@code storeKey} if a live process has it open
     * already, leaving that rank's slot alone.
     */
    void join(int rank, String storeKey) {
        int other = pid(rank);
        if (isOpen(rank) && Processes.isAlive(other)) {
            throw new IllegalStateException("store '" + storeKey + "': rank " + rank + " is already open in process " + other);
        }
        seg.set(ValueLayout.JAVA_INT, pidOffset(rank), Processes.currentPid());
        seg.set(ValueLayout.JAVA_BYTE, openOffset(rank), (byte) 1);
    }

    /** Records {@code rank} as closed; its pid stays. */
    void leave(int rank) {
        seg.set(ValueLayout.JAVA_BYTE, openOffset(rank), (byte) 0);
    }

    /** True if no rank but {@code rank} is open in a live process: the caller is the last one. */
    boolean noOtherAlive(int rank) {
        for (int r = 0; r < worldSize; r++) {
            if (r != rank && isOpen(r) && Processes.isAlive(pid(r))) {
                return false;
            }
        }
        return true;
    }

    /**
     * Throws a {@link CommException} naming {@code op}, the dead rank and its pid, and what was {@code seen}, if an
     * open participant's process has exited.
     */
    void checkAlive(String op, Supplier<String> seen) {
        for (int r = 0; r < worldSize; r++) {
            if (!isOpen(r)) {
                continue;
            }
            int pid = pid(r);
            if (!Processes.isAlive(pid)) {
                throw new CommException(op + ": participant rank " + r + " (pid " + pid + ") exited without closing the store; "
                    + seen.get());
            }
        }
    }

    /** The process id of every rank, as each recorded it when it joined. */
    int[] pids() {
        int[] pids = new int[worldSize];
        for (int r = 0; r < pids.length; r++) {
            pids[r] = pid(r);
        }
        return pids;
    }

    private int pid(int rank) {
        return seg.get(ValueLayout.JAVA_INT, pidOffset(rank));
    }

    private boolean isOpen(int rank) {
        return seg.get(ValueLayout.JAVA_BYTE, openOffset(rank)) != 0;
    }
}
