package org.dtorch.core.runtime;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.core.communication.promise.RemoteFailureException;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * The {@link FailureRegistry} of a runtime whose devices are processes: an open-addressing table in shared
 * memory that every worker writes and reads, and that the controller prunes. A failure crosses as text
 * (class and message); a process keeps the original exceptions of its own failures.
 *
 * <pre>
 * header (64 bytes)
 *   0       4     anyFailure   1 once anything failed (release-written after the slot)
 * slots (4096 x 512 bytes, from offset 64), probed linearly from the operand id's hash
 *   0       4     state        EMPTY, WRITING, FULL, GONE (forgotten; reusable, probes continue past it)
 *   8       8     operandId
 *   16      496   text         int length + UTF-8
 * </pre>
 *
 * <p>When the table is full, a failure stays in the recording process only (and a warning is logged):
 * peers then see it only through their own failed kernels.
 *
 * <p>Every operation holds a reference on the mapping while it touches it, so an operation that races with
 * {@link #close()} (a worker's exit being handled as the runtime closes) sees an empty board instead of
 * unmapped memory.
 *
 * <p>Thread-safe: slots are claimed by compare-and-set; readers acquire the state before the contents.
 */
final class SharedFailureBoard implements FailureRegistry, AutoCloseable {
    private static final System.Logger LOG = System.getLogger(SharedFailureBoard.class.getName());
    private static final long ANY = 0;
    private static final long SLOTS = 64;
    private static final long SLOT_SIZE = 512;
    private static final int CAPACITY = 4096;
    private static final long S_STATE = 0;
    private static final long S_ID = 8;
    private static final long S_TEXT = 16;
    private static final int TEXT_CAPACITY = (int) (SLOT_SIZE - S_TEXT);
    private static final int EMPTY = 0;
    private static final int WRITING = 1;
    private static final int FULL = 2;
    private static final int GONE = 3;
    static final long SIZE = SLOTS + CAPACITY * SLOT_SIZE;

    private final SharedRegion region;
    private final MemorySegment seg;
    private final Map<Long, Throwable> local = new ConcurrentHashMap<>();

    private SharedFailureBoard(SharedRegion region) {
        this.region = region;
        this.seg = region.segment();
    }

    /** Creates the board of a runtime (the controller does). */
    static SharedFailureBoard create(String name) {
        return new SharedFailureBoard(SharedRegion.create(name, SIZE)
            .orElseThrow(() -> new IllegalStateException("shared memory " + name + " exists already")));
    }

    /** Opens the board a controller created (a worker does). */
    static SharedFailureBoard open(String name) {
        SharedRegion region = SharedRegion.open(name).orElseThrow(() -> new IllegalStateException("failure board " + name + " does not exist"));
        if (region.size() != SIZE) {
            region.close();
            throw new IllegalStateException("shared memory " + name + " is not a failure board of this version");
        }
        return new SharedFailureBoard(region);
    }

    private static long slot(int index) {
        return SLOTS + index * SLOT_SIZE;
    }

    private static int home(long operandId) {
        return (int) Math.floorMod(operandId * 0x9E3779B97F4A7C15L >>> 20, CAPACITY);
    }

    @Override
    public void fail(long operandId, Throwable cause) {
        local.putIfAbsent(operandId, cause);
        if (!region.retain()) {
            return; // closed: the failure stays in this process
        }
        try {
            publish(operandId, cause);
        } finally {
            region.release();
        }
    }

    private void publish(long operandId, Throwable cause) {
        if (find(operandId) >= 0) {
            return;
        }
        for (int probe = 0, i = home(operandId); probe < CAPACITY; probe++, i = (i + 1) % CAPACITY) {
            long base = slot(i);
            int state = Shm.getIntAcquire(seg, base + S_STATE);
            if ((state == EMPTY || state == GONE) && Shm.casInt(seg, base + S_STATE, state, WRITING)) {
                seg.set(ValueLayout.JAVA_LONG, base + S_ID, operandId);
                Shm.putString(seg, base + S_TEXT, TEXT_CAPACITY, RemoteFailureException.describe(cause));
                Shm.putIntRelease(seg, base + S_STATE, FULL);
                Shm.putIntRelease(seg, ANY, 1);
                return;
            }
        }
        LOG.log(System.Logger.Level.WARNING, "the failure board is full; the failure of %" + operandId + " stays in this process");
    }

    @Override
    public Throwable failure(long operandId) {
        if (!anyFailure()) {
            return null;
        }
        Throwable mine = local.get(operandId);
        if (mine != null || !region.retain()) {
            return mine;
        }
        try {
            int index = find(operandId);
            return index < 0 ? null : new RemoteFailureException(Shm.getString(seg, slot(index) + S_TEXT));
        } finally {
            region.release();
        }
    }

    /** The slot holding {@code operandId}, or -1; waits out a slot being written. */
    private int find(long operandId) {
        for (int probe = 0, i = home(operandId); probe < CAPACITY; probe++, i = (i + 1) % CAPACITY) {
            long base = slot(i);
            int state = Shm.getIntAcquire(seg, base + S_STATE);
            while (state == WRITING) {
                Thread.onSpinWait();
                state = Shm.getIntAcquire(seg, base + S_STATE);
            }
            if (state == EMPTY) {
                return -1;
            }
            if (state == FULL && seg.get(ValueLayout.JAVA_LONG, base + S_ID) == operandId) {
                return i;
            }
        }
        return -1;
    }

    @Override
    public boolean anyFailure() {
        if (!local.isEmpty()) {
            return true;
        }
        if (!region.retain()) {
            return false;
        }
        try {
            return Shm.getIntAcquire(seg, ANY) != 0;
        } finally {
            region.release();
        }
    }

    @Override
    public void forget(long operandId) {
        local.remove(operandId);
        if (!region.retain()) {
            return;
        }
        try {
            int index;
            while ((index = find(operandId)) >= 0) {
                Shm.casInt(seg, slot(index) + S_STATE, FULL, GONE);
            }
        } finally {
            region.release();
        }
    }

    @Override
    public int size() {
        if (!region.retain()) {
            return 0;
        }
        try {
            int n = 0;
            for (int i = 0; i < CAPACITY; i++) {
                if (Shm.getIntAcquire(seg, slot(i) + S_STATE) == FULL) {
                    n++;
                }
            }
            return n;
        } finally {
            region.release();
        }
    }

    /** The board's shared-memory name. */
    String name() {
        return region.name();
    }

    /** Unmaps; the controller also removes the name. */
    @Override
    public void close() {
        region.close();
    }

    /** Removes the name; mappings stay valid. */
    void unlink() {
        region.unlink();
    }
}
