package org.dtorch.core.trace;

/**
 * One recorded event, as {@link TraceBuffer#drainTo} hands it to a {@link Trace}: a span from {@code start} to
 * {@code end} (equal for an instant), in {@link System#nanoTime()} units. The meaning of {@code id}, {@code count},
 * {@code a}, {@code b} and {@code c} depends on the {@link Kind}; they hold objects the caller already had (an
 * operator's name and metadata, a group's device list), so recording allocates nothing, and rendering waits for the
 * export.
 *
 * <p>Thread-safe: immutable.
 */
record TraceEvent(TraceEvent.Kind kind, String name, long start, long end, long id, long count, Object a, Object b, Object c) {
    /** What an event is, and what its fields hold. */
    enum Kind {
        /** Client: an operator enqueued. id: operator id; a: the outputs' {@code TensorMeta}s; b: its devices. */
        ENQUEUE("client"),
        /** Controller: an operator dispatched to its devices. id: operator id. */
        DISPATCH("controller"),
        /** Worker: a kernel ran. id: operator id; count: the device id. */
        KERNEL("kernel"),
        /**
         * Worker: a collective. count: bytes this rank contributed; a: {@code CollectiveKind} (null: the completion of an
         * issued one); b: the group's device ids; c: the backend's name.
         */
        COLLECTIVE("collective"),
        /** A store wait. a: the store key; name: the call. */
        STORE_WAIT("store"),
        /** An instant: a promise completed. name: the promise kind. */
        PROMISE("promise", true),
        /**
         * A kernel's device time, measured by events on the device's stream ({@link StreamTimeline}) and placed on the
         * host clock. id: operator id; count: the device id. Last, so the kinds' numbers in {@link TracePart} stay.
         */
        DEVICE_KERNEL("device"),
        /**
         * A collective's device time, from the worker's stream ({@link StreamTimeline}): from when the stream reached it
         * to when the stream could go on after it (waits for the peers included). name: the collective's op; count: the
         * device id.
         */
        DEVICE_COLLECTIVE("device"),
        /**
         * An instant: a control frame sent or received (process mode). name: its type and direction
         * ({@code OPERATOR sent}); id: its number among the frames of that type the channel sent or received, so a
         * frame sent and the same frame received have one number; count: its bytes; a: the peer.
         */
        CONTROL("control", true);

        final String category;
        /** An instant, not a span: exported as {@code "ph": "i"} and left out of the totals. */
        final boolean instant;

        Kind(String category) {
            this(category, false);
        }

        Kind(String category, boolean instant) {
            this.category = category;
            this.instant = instant;
        }
    }
}
