package org.dtorch.core.communication.channel;

import static org.dtorch.core.communication.channel.ChannelLayout.STATE_CLOSED;
import static org.dtorch.core.communication.channel.ChannelLayout.STATE_FAILED;
import static org.dtorch.core.communication.channel.ChannelLayout.STATE_FAILING;
import static org.dtorch.core.communication.channel.ChannelLayout.STATE_OPEN;

import java.util.ArrayList;
import java.util.List;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.shm.Futex;
import org.dtorch.core.shm.Processes;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * One process's mapping of a channel's control region ({@link ChannelLayout}): the channel's state and failure
 * message, the attached producer and consumers, the ACK array, and the ref queues. Every wait here sleeps on a
 * futex word for at most {@link #POLL_NANOS} at a time, then checks the deadline, the channel's state and whether
 * the peers it waits for are still alive, so a dead peer is an error within that tick rather than a hang.
 *
 * <p>Thread-safe: every word is read and written atomically with the ordering in its method's name; the ring buffer
 * of rank {@code r} has one writer (the producer) and one reader (consumer {@code r}).
 */
final class ChannelControl implements AutoCloseable {
    /** The longest single futex sleep: how soon a dead peer or a failed channel is noticed by a waiter. */
    static final long POLL_NANOS = 20_000_000L;

    private final ChannelOptions options;
    private final ChannelLayout layout;
    private final SharedRegion region;
    private final UnsafeBuffer buffer;

    private ChannelControl(ChannelOptions options, SharedRegion region) {
        this.options = options;
        this.layout = ChannelLayout.of(options);
        this.region = region;
        this.buffer = mapped(region);
    }

    private static UnsafeBuffer mapped(SharedRegion region) {
        try {
            UnsafeBuffer buffer = new UnsafeBuffer(region.address(), Math.toIntExact(region.size()));
            buffer.getIntVolatile(0);
            return buffer;
        } catch (IllegalAccessError | NoClassDefFoundError e) {
            region.close();
            throw new IllegalStateException("a WorkerTensorChannel needs the JVM option "
                + "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED (Agrona reaches the JDK's Unsafe there); see docs/configuration.md, JVM flags",
                e);
        }
    }

    /** {@code dtorch-<instance>-ch-<hash of the name>}: the control region; every file of the channel starts with it. */
    static String controlName(ChannelOptions options) {
        String instance = options.instanceId().length() > 100 ? options.instanceId().substring(0, 100) : options.instanceId();
        return SharedRegion.PREFIX + instance + "-ch-" + CommPaths.sha256Hex(options.name()).substring(0, 24);
    }

    /** Creates the control region of a new channel. */
    static ChannelControl create(ChannelOptions options) {
        ChannelLayout layout = ChannelLayout.of(options);
        String name = controlName(options);
        SharedRegion region = SharedRegion.create(name, layout.size())
            .orElseThrow(() -> new IllegalStateException("channel '" + options.name() + "' exists already (" + name + ")"));
        ChannelControl control = new ChannelControl(options, region);
        control.buffer.putInt((int) ChannelLayout.CONSUMERS_OFFSET, options.consumerWorldSize());
        control.buffer.putInt((int) ChannelLayout.PROFILES_OFFSET, options.maxProfiles());
        control.buffer.putInt((int) ChannelLayout.QUEUE_CAPACITY_OFFSET, options.refQueueBytes());
        control.buffer.putIntRelease((int) ChannelLayout.MAGIC_OFFSET, ChannelLayout.MAGIC);
        return control;
    }

    /** Maps the control region of an existing channel, checking that it was made with the same options. */
    static ChannelControl attach(ChannelOptions options) {
        String name = controlName(options);
        SharedRegion region = SharedRegion.open(name)
            .orElseThrow(() -> new IllegalStateException("channel '" + options.name() + "' does not exist (no " + name
                + "): create the channel before its producer and consumers"));
        ChannelControl control = new ChannelControl(options, region);
        try {
            control.checkHeader();
        } catch (RuntimeException e) {
            control.close();
            throw e;
        }
        return control;
    }

    private void checkHeader() {
        if (region.size() < ChannelLayout.MAGIC_OFFSET + 64
            || buffer.getIntAcquire((int) ChannelLayout.MAGIC_OFFSET) != ChannelLayout.MAGIC) {
            throw new IllegalStateException("channel '" + options.name() + "': " + region + " is not a channel");
        }
        int consumers = buffer.getInt((int) ChannelLayout.CONSUMERS_OFFSET);
        int profiles = buffer.getInt((int) ChannelLayout.PROFILES_OFFSET);
        int queue = buffer.getInt((int) ChannelLayout.QUEUE_CAPACITY_OFFSET);
        if (consumers != options.consumerWorldSize() || profiles != options.maxProfiles() || queue != options.refQueueBytes()) {
            throw new IllegalArgumentException("channel '" + options.name() + "' was created with " + consumers + " consumer ranks, "
                + profiles + " profiles and " + queue + "-byte ref queues; this side asks for " + options.consumerWorldSize() + ", "
                + options.maxProfiles() + " and " + options.refQueueBytes());
        }
        if (region.size() < layout.size()) {
            throw new IllegalStateException("channel '" + options.name() + "': " + region + " is smaller than its layout ("
                + layout.size() + " bytes)");
        }
    }

    ChannelOptions options() {
        return options;
    }

    ChannelLayout layout() {
        return layout;
    }

    String controlName() {
        return region.name();
    }

    /** The channel's name for messages. */
    String label() {
        return "channel '" + options.name() + "'";
    }

    /** Throws, naming the cause, unless the channel is open. */
    void checkOpen(String operation) {
        int state = buffer.getIntAcquire((int) ChannelLayout.STATE_OFFSET);
        if (state == STATE_OPEN) {
            return;
        }
        String cause = switch (state) {
            case STATE_FAILED -> Shm.getString(region.segment(), layout.messageOffset());
            case STATE_CLOSED -> "the channel was closed";
            default -> "the channel is failing (its cause is being recorded)";
        };
        throw new CommException(operation + " on " + label() + " refused: the channel is no longer usable: " + cause);
    }

    /**
     * Marks the channel failed with {@code message} (the first failure wins), wakes every waiter, and returns the
     * exception to throw.
     */
    CommException fail(String message, boolean timeout) {
        if (buffer.compareAndSetInt((int) ChannelLayout.STATE_OFFSET, STATE_OPEN, STATE_FAILING)) {
            Shm.putString(region.segment(), layout.messageOffset(), ChannelLayout.MESSAGE_CAPACITY, message);
            buffer.putIntRelease((int) ChannelLayout.STATE_OFFSET, STATE_FAILED);
            wakeAll();
        }
        return timeout ? new CommTimeoutException(message) : new CommException(message);
    }

    /** Marks the channel closed unless it failed; wakes every waiter. */
    void markClosed() {
        buffer.compareAndSetInt((int) ChannelLayout.STATE_OFFSET, STATE_OPEN, STATE_CLOSED);
        wakeAll();
    }

    private void wakeAll() {
        Futex.wakeAll(region.segment(), ChannelLayout.ACK_COUNTER_OFFSET);
        for (int r = 0; r < layout.consumers(); r++) {
            Futex.wakeAll(region.segment(), layout.refCounterOffset(r));
        }
    }

    /** Records this process as the channel's only producer. */
    void attachProducer() {
        int pid = Processes.currentPid();
        buffer.putLong((int) ChannelLayout.PRODUCER_TICKS_OFFSET, Processes.currentStartTicks());
        int previous = buffer.compareAndExchangeInt((int) ChannelLayout.PRODUCER_PID_OFFSET, 0, pid);
        if (previous != 0) {
            throw new IllegalStateException(label() + " has a producer already (pid " + Math.abs(previous)
                + (previous < 0 ? ", detached" : "") + "): one producer group per channel");
        }
    }

    /** Records this process as consumer {@code rank}. */
    void attachConsumer(int rank) {
        if (rank < 0 || rank >= layout.consumers()) {
            throw new IllegalArgumentException(label() + " has consumer ranks 0 to " + (layout.consumers() - 1) + ", got rank " + rank);
        }
        int pid = Processes.currentPid();
        buffer.putLong((int) layout.consumerTicksOffset(rank), Processes.currentStartTicks());
        int previous = buffer.compareAndExchangeInt((int) layout.consumerPidOffset(rank), 0, pid);
        if (previous != 0) {
            throw new IllegalStateException(label() + " has consumer rank " + rank + " already (pid " + Math.abs(previous)
                + (previous < 0 ? ", detached" : "") + ")");
        }
    }

    /** Marks the producer detached (its pid negated). */
    void detachProducer() {
        buffer.putIntRelease((int) ChannelLayout.PRODUCER_PID_OFFSET, -Processes.currentPid());
    }

    /** Marks consumer {@code rank} detached and wakes the producer, which may be waiting for its ACK. */
    void detachConsumer(int rank) {
        buffer.putIntRelease((int) layout.consumerPidOffset(rank), -Processes.currentPid());
        Futex.wakeAll(region.segment(), ChannelLayout.ACK_COUNTER_OFFSET);
    }

    /** Publishes rank {@code rank}'s ACK ({@code generation}, or its negation for a discard) and wakes the producer. */
    void putAck(int profile, int slot, int rank, long signedGeneration) {
        buffer.putLongRelease((int) layout.ackOffset(profile, slot, rank), signedGeneration);
        buffer.getAndAddInt((int) ChannelLayout.ACK_COUNTER_OFFSET, 1);
        Futex.wakeAll(region.segment(), ChannelLayout.ACK_COUNTER_OFFSET);
    }

    /**
     * Waits until every consumer rank acknowledged (copied or discarded) {@code generation} of {@code slot} of
     * {@code profile}.
     *
     * @throws CommException naming the channel, slot, generation and the ranks seen and missing, if the deadline
     *                       passes (the channel is then failed), a missing rank's process exited or detached, or the
     *                       channel failed or closed meanwhile
     */
    void awaitAcks(int profile, int slot, long generation, Deadline deadline) {
        boolean quiet = false;
        while (true) {
            int counter = buffer.getIntAcquire((int) ChannelLayout.ACK_COUNTER_OFFSET);
            List<Integer> missing = missingAcks(profile, slot, generation);
            if (missing.isEmpty()) {
                return;
            }
            checkOpen("waiting for the ACKs of profile " + profile + " slot " + slot + " generation " + generation);
            String what = label() + ": the producer waited for the ACKs of profile " + profile + " slot " + slot + " generation "
                + generation + " before reusing the slot; ranks missing " + missing + ", seen " + seenRanks(missing);
            // The liveness check reads /proc: only after a tick without any ACK, never between a wake and its ACK.
            if (quiet) {
                for (int r : missing) {
                    String gone = consumerGone(r);
                    if (gone != null) {
                        throw fail(what + ": " + gone, false);
                    }
                }
            }
            if (deadline.expired()) {
                throw fail(what + ": " + deadline.timedOutAfter(), true);
            }
            quiet = !awaitAckSignal(counter, deadline);
        }
    }

    /**
     * Waits until every consumer rank that may still copy from {@code slot} of {@code profile} (attached and alive)
     * acknowledged {@code generation}: a producer about to release the slot's device memory. Never throws: past the
     * deadline it marks the channel failed, naming the ranks, so that no consumer starts a copy of released memory.
     *
     * @return false if the deadline passed or the channel is no longer open
     */
    boolean awaitAcksBeforeRelease(int profile, int slot, long generation, Deadline deadline) {
        while (true) {
            int counter = buffer.getIntAcquire((int) ChannelLayout.ACK_COUNTER_OFFSET);
            List<Integer> waiting = missingAcks(profile, slot, generation).stream().filter(r -> consumerGone(r) == null).toList();
            if (waiting.isEmpty()) {
                return true;
            }
            if (buffer.getIntAcquire((int) ChannelLayout.STATE_OFFSET) != STATE_OPEN) {
                return false;
            }
            if (deadline.expired()) {
                fail(label() + ": the producer's close waited for the ACKs of profile " + profile + " slot " + slot + " generation "
                    + generation + " before releasing its CUDA pool; ranks missing " + waiting + "; " + deadline.timedOutAfter(), true);
                return false;
            }
            awaitAckSignal(counter, deadline);
        }
    }

    /** Sleeps until the ACK counter changes from {@code counter}, for at most a poll tick; false if the tick passed. */
    private boolean awaitAckSignal(int counter, Deadline deadline) {
        return Futex.await(region.segment(), ChannelLayout.ACK_COUNTER_OFFSET, counter, Math.min(POLL_NANOS, deadline.remainingNanos()))
            == Futex.Wake.CHANGED;
    }

    /** The ranks whose ACK of {@code slot} of {@code profile}, copied or discarded, is below {@code generation}. */
    private List<Integer> missingAcks(int profile, int slot, long generation) {
        List<Integer> missing = new ArrayList<>();
        for (int r = 0; r < layout.consumers(); r++) {
            if (Math.abs(ack(profile, slot, r)) < generation) {
                missing.add(r);
            }
        }
        return missing;
    }

    /** Rank {@code rank}'s ACK of {@code slot} of {@code profile}: g copied, -g discarded, 0 none yet. */
    long ack(int profile, int slot, int rank) {
        return buffer.getLongAcquire((int) layout.ackOffset(profile, slot, rank));
    }

    /**
     * Writes rank {@code rank}'s completion event handle for {@code slot} of {@code profile}, once, before that rank's
     * first positive ACK of the slot: the ACK's release publishes it.
     */
    void putEventHandle(int profile, int slot, int rank, byte[] handle) {
        buffer.putBytes((int) layout.eventHandleOffset(profile, slot, rank), handle, 0, ChannelLayout.EVENT_HANDLE_BYTES);
    }

    /**
     * Rank {@code rank}'s completion event handle for {@code slot} of {@code profile}; read it after a positive
     * {@link #ack} of that slot (whose acquire makes it visible), all zeros if the rank never published one.
     */
    byte[] eventHandle(int profile, int slot, int rank) {
        byte[] handle = new byte[ChannelLayout.EVENT_HANDLE_BYTES];
        buffer.getBytes((int) layout.eventHandleOffset(profile, slot, rank), handle);
        return handle;
    }

    private List<Integer> seenRanks(List<Integer> missing) {
        List<Integer> seen = new ArrayList<>();
        for (int r = 0; r < layout.consumers(); r++) {
            if (!missing.contains(r)) {
                seen.add(r);
            }
        }
        return seen;
    }

    /**
     * Why consumer {@code rank} can no longer ACK, or null if it may still: it detached (its close finished its device
     * work first) or its process exited.
     */
    String consumerGone(int rank) {
        int pid = consumerPid(rank);
        if (pid < 0) {
            return "consumer rank " + rank + " (pid " + -pid + ") detached without acknowledging";
        }
        if (pid > 0 && Processes.hasExited(pid, buffer.getLong((int) layout.consumerTicksOffset(rank)))) {
            return "consumer rank " + rank + " (pid " + pid + ") exited without closing";
        }
        return null;
    }

    /** The pid consumer {@code rank} attached with (negated once it detached; 0 before it attached). */
    int consumerPid(int rank) {
        return buffer.getIntAcquire((int) layout.consumerPidOffset(rank));
    }

    /** True once the producer closed. */
    boolean producerDetached() {
        return buffer.getIntAcquire((int) ChannelLayout.PRODUCER_PID_OFFSET) < 0;
    }

    /** Why the producer can no longer publish, if it exited without closing; null otherwise. */
    String producerGone() {
        int pid = buffer.getIntAcquire((int) ChannelLayout.PRODUCER_PID_OFFSET);
        if (pid > 0 && Processes.hasExited(pid, buffer.getLong((int) ChannelLayout.PRODUCER_TICKS_OFFSET))) {
            return "the producer (pid " + pid + ") exited without closing";
        }
        return null;
    }

    /** A view of consumer {@code rank}'s ref queue (one writer: the producer; one reader: that rank). */
    OneToOneRingBuffer queue(int rank) {
        return new OneToOneRingBuffer(new UnsafeBuffer(buffer, (int) layout.queueOffset(rank), layout.queueLength()));
    }

    /** Bumps rank {@code rank}'s ref counter and wakes it. */
    void signalRef(int rank) {
        buffer.getAndAddInt((int) layout.refCounterOffset(rank), 1);
        Futex.wakeAll(region.segment(), layout.refCounterOffset(rank));
    }

    /** The value of rank {@code rank}'s ref counter, to sleep on. */
    int refCounter(int rank) {
        return buffer.getIntAcquire((int) layout.refCounterOffset(rank));
    }

    /**
     * Sleeps until rank {@code rank}'s ref counter changes from {@code seen}, for at most a poll tick; false if the
     * tick passed.
     */
    boolean awaitRefSignal(int rank, int seen, Deadline deadline) {
        return Futex.await(region.segment(), layout.refCounterOffset(rank), seen, Math.min(POLL_NANOS, deadline.remainingNanos()))
            == Futex.Wake.CHANGED;
    }

    /** Unmaps the control region. Idempotent. */
    @Override
    public void close() {
        region.close();
    }
}
