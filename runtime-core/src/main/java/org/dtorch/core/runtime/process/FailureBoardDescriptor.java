package org.dtorch.core.runtime.process;

/**
 * The layout of a {@link SharedFailureBoard}'s shared memory, in the manner of Agrona's {@code *Descriptor}
 * classes: every offset is built from the named sizes before it, and nobody else computes one.
 *
 * <pre>
 * header (HEADER_LENGTH = one cache line)
 *   offset  size  field
 *   0       4     anyFailure   1 once anything failed (release-written after the slot it announces)
 * slots (CAPACITY x SLOT_LENGTH, from HEADER_LENGTH), probed linearly from the operand id's hash
 *   0       4     state        EMPTY, WRITING, FULL, GONE (forgotten; reusable, probes continue past it)
 *   4       4     kind         the failure's {@link org.dtorch.core.communication.FailureKind} ordinal
 *   8       8     operandId
 *   16      496   text         int length + UTF-8 (class and message of the failure and its causes)
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
final class FailureBoardDescriptor {
    /** One cache line: the header never shares a line with the first slot. */
    static final int HEADER_LENGTH = 64;
    static final int ANY_FAILURE_OFFSET = 0;

    static final int STATE_OFFSET = 0;
    static final int KIND_OFFSET = STATE_OFFSET + Integer.BYTES;
    static final int OPERAND_ID_OFFSET = KIND_OFFSET + Integer.BYTES;
    static final int TEXT_OFFSET = OPERAND_ID_OFFSET + Long.BYTES;
    static final int SLOT_LENGTH = 512;
    /** The text field's bytes, its length prefix included. */
    static final int TEXT_CAPACITY = SLOT_LENGTH - TEXT_OFFSET;
    static final int CAPACITY = 4096;
    /** The board's size in bytes; a region of another size is not a board of this version. */
    static final long LENGTH = HEADER_LENGTH + (long) CAPACITY * SLOT_LENGTH;

    static final int EMPTY = 0;
    static final int WRITING = 1;
    static final int FULL = 2;
    static final int GONE = 3;

    private FailureBoardDescriptor() {
    }

    /** Where slot {@code index} starts. */
    static long slotOffset(int index) {
        if (index < 0 || index >= CAPACITY) {
            throw new IndexOutOfBoundsException("slot " + index + " of " + CAPACITY);
        }
        return HEADER_LENGTH + (long) index * SLOT_LENGTH;
    }

    /** The slot where probing for {@code operandId} starts (a Fibonacci hash). */
    static int homeSlot(long operandId) {
        return (int) Math.floorMod(operandId * 0x9E3779B97F4A7C15L >>> 20, CAPACITY);
    }
}
