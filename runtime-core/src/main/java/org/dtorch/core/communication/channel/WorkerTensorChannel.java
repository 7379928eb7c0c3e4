package org.dtorch.core.communication.channel;

import java.util.concurrent.atomic.AtomicLong;
import org.dtorch.core.shm.SharedRegion;

/**
 * A same-host tensor channel from one producer group to one consumer group of workers (TeleFuser's
 * WorkerTensorChannel). The producer publishes a structure of tensors and gets a small {@link WorkerTensorRef}; the
 * ref travels over the control path (the channel's own per-consumer queues, or any other by bytes) while the tensor
 * bytes stay in persistent shared memory, two slots per profile, reused once every consumer rank acknowledged them.
 *
 * <p>Lifetime: create the channel first ({@link #create}), then attach the producer ({@link #producer}) and the
 * consumers ({@link #consumer}), in any processes of this host; shut down in the order consumers, producer,
 * channel. Closing the channel removes every file of it; mappings still held elsewhere stay valid, and later calls
 * on them fail naming the closed channel. A timeout or a dead peer marks the channel failed: every later call on
 * any side fails at once with the first cause.
 *
 * <p>Thread-safe: the channel object only owns the control region; the producer and consumers have their own
 * contracts.
 */
public final class WorkerTensorChannel implements AutoCloseable {
    private static final AtomicLong DEVICE_COPIES = new AtomicLong();

    private final ChannelControl control;
    private boolean closed;

    private WorkerTensorChannel(ChannelControl control) {
        this.control = control;
    }

    /**
     * Creates a channel: its control region with the ACK array and the ref queues.
     *
     * @throws IllegalStateException if a channel of that name exists in the instance
     */
    public static WorkerTensorChannel create(ChannelOptions options) {
        return new WorkerTensorChannel(ChannelControl.create(options));
    }

    /**
     * Attaches this process as the channel's producer.
     *
     * @throws IllegalStateException if the channel does not exist or has a producer already
     * @throws IllegalArgumentException if the channel was created with other options
     */
    public static ChannelProducer producer(ChannelOptions options) {
        return ChannelProducer.attach(options);
    }

    /**
     * Attaches this thread as consumer {@code rank}.
     *
     * @throws IllegalStateException if the channel does not exist or has that rank already
     * @throws IllegalArgumentException if the rank is out of range or the channel was created with other options
     *                                  (a consumer count that does not match, for instance)
     */
    public static ChannelConsumer consumer(ChannelOptions options, int rank) {
        return ChannelConsumer.attach(options, rank);
    }

    /**
     * How many copies on a CUDA device this process's channels issued so far: a producer's copy into a slot, a
     * consumer's copy out of one, and past the profile bound the copy to host memory and the copy back. A CUDA
     * hand-off through a pool costs one copy in plus one per consumer rank; for tests and benchmarks.
     */
    public static long deviceCopies() {
        return DEVICE_COPIES.get();
    }

    static void countDeviceCopy() {
        DEVICE_COPIES.incrementAndGet();
    }

    /** The channel's options. */
    public ChannelOptions options() {
        return control.options();
    }

    /** Marks the channel closed and removes every file of it (control, profile and fallback regions). Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        control.markClosed();
        SharedRegion.unlinkAll(control.controlName());
        control.close();
    }
}
