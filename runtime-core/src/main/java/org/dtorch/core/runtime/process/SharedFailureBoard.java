package org.dtorch.core.runtime.process;

import static org.dtorch.core.runtime.process.FailureBoardDescriptor.ANY_FAILURE_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.CAPACITY;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.EMPTY;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.FULL;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.GONE;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.KIND_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.LENGTH;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.OPERAND_ID_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.STATE_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.TEXT_CAPACITY;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.TEXT_OFFSET;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.WRITING;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.homeSlot;
import static org.dtorch.core.runtime.process.FailureBoardDescriptor.slotOffset;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.RemoteFailureException;
import org.dtorch.core.runtime.FailureRegistry;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * The {@link FailureRegistry} of a runtime whose devices are processes: an open-addressing table in shared
 * memory that every worker writes and reads, and that the controller prunes. A failure crosses as text (class
 * and message) with its {@link FailureKind}; a process keeps the original exceptions of its own failures. The
 * layout is {@link FailureBoardDescriptor}'s.
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

    private final SharedRegion region;
    private final MemorySegment seg;
    private final Map<Long, Throwable> local = new ConcurrentHashMap<>();

    private SharedFailureBoard(SharedRegion region) {
        this.region = region;
        this.seg = region.segment();
    }

    /** Creates the board of a runtime (the controller does). */
    public static SharedFailureBoard create(String name) {
        return new SharedFailureBoard(SharedRegion.create(name, LENGTH)
            .orElseThrow(() -> new IllegalStateException("shared memory " + name + " exists already")));
    }

    /** Opens the board a controller created (a worker does). */
    public static SharedFailureBoard open(String name) {
        SharedRegion region = SharedRegion.open(name).orElseThrow(() -> new IllegalStateException("failure board " + name + " does not exist"));
        if (region.size() != LENGTH) {
            region.close();
            throw new IllegalStateException("shared memory " + name + " is not a failure board of this version");
        }
        return new SharedFailureBoard(region);
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
        for (int probe = 0, i = homeSlot(operandId); probe < CAPACITY; probe++, i = (i + 1) % CAPACITY) {
            long base = slotOffset(i);
            int state = Shm.getIntAcquire(seg, base + STATE_OFFSET);
            if ((state == EMPTY || state == GONE) && Shm.casInt(seg, base + STATE_OFFSET, state, WRITING)) {
                seg.set(ValueLayout.JAVA_LONG, base + OPERAND_ID_OFFSET, operandId);
                seg.set(ValueLayout.JAVA_INT, base + KIND_OFFSET, FailureKind.of(cause).ordinal());
                Shm.putString(seg, base + TEXT_OFFSET, TEXT_CAPACITY, RemoteFailureException.describe(cause));
                Shm.putIntRelease(seg, base + STATE_OFFSET, FULL);
                Shm.putIntRelease(seg, ANY_FAILURE_OFFSET, 1);
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
            if (index < 0) {
                return null;
            }
            long base = slotOffset(index);
            return new RemoteFailureException(FailureKind.fromOrdinal(seg.get(ValueLayout.JAVA_INT, base + KIND_OFFSET)),
                Shm.getString(seg, base + TEXT_OFFSET));
        } finally {
            region.release();
        }
    }

    /** The slot holding {@code operandId}, or -1; waits out a slot being written. */
    private int find(long operandId) {
        for (int probe = 0, i = homeSlot(operandId); probe < CAPACITY; probe++, i = (i + 1) % CAPACITY) {
            long base = slotOffset(i);
            int state = Shm.getIntAcquire(seg, base + STATE_OFFSET);
            while (state == WRITING) {
                Thread.onSpinWait();
                state = Shm.getIntAcquire(seg, base + STATE_OFFSET);
            }
            if (state == EMPTY) {
                return -1;
            }
            if (state == FULL && seg.get(ValueLayout.JAVA_LONG, base + OPERAND_ID_OFFSET) == operandId) {
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
            return Shm.getIntAcquire(seg, ANY_FAILURE_OFFSET) != 0;
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
                Shm.casInt(seg, slotOffset(index) + STATE_OFFSET, FULL, GONE);
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
                if (Shm.getIntAcquire(seg, slotOffset(i) + STATE_OFFSET) == FULL) {
                    n++;
                }
            }
            return n;
        } finally {
            region.release();
        }
    }

    /** The board's shared-memory name. */
    public String name() {
        return region.name();
    }

    /** Unmaps; the controller also removes the name. */
    @Override
    public void close() {
        region.close();
    }

    /** Removes the name; mappings stay valid. */
    public void unlink() {
        region.unlink();
    }
}
