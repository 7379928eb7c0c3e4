package org.dtorch.core.communication.channel;

import org.agrona.BitUtil;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;
import org.dtorch.core.device.DeviceEvent;

/**
 * The layout of a channel's control region, its only owner of offsets. With {@code N} consumer ranks,
 * {@code P} profiles of {@value #SLOTS} slots and ref queues of {@code C} bytes:
 *
 * <pre>
 *  offset              size            field
 *  0                   4               magic 'DTCH'
 *  4                   4               consumer world size N
 *  8                   4               max profiles P
 *  12                  4               ref queue capacity C
 *  16                  4               state: OPEN, FAILING (the message is being written), FAILED, CLOSED
 *  20                  4               ACK counter: bumped after every ACK, the producer's futex word
 *  24                  4               producer pid: 0 none yet, &gt; 0 attached, &lt; 0 detached
 *  32                  8               producer start ticks
 *  40                  16 * N          per consumer rank: pid (int, as the producer's), ref counter (int: bumped
 *                                      after every ref queued to it, the consumer's futex word), start ticks (long)
 *  MESSAGE             1024            the failure message (Shm.putString)
 *  ACKS (64-aligned)   8 * P * 2 * N   ACK generations, long [profile][slot][rank]: g copied, -g discarded
 *  EVENTS (64-aligned) H * P * 2 * N   completion event handles, [profile][slot][rank] (H = EVENT_HANDLE_BYTES): a
 *                                      CUDA consumer rank's reusable interprocess event, written once before the
 *                                      rank's first positive ACK of that slot; all zeros until then
 *  QUEUES (64-aligned) N * (C + T)     per consumer rank an Agrona one-to-one ring buffer of serialized refs
 *                                      (T = RingBufferDescriptor.TRAILER_LENGTH)
 * </pre>
 *
 * <p>Thread-safe: an immutable value.
 */
record ChannelLayout(int consumers, int profiles, int queueCapacity) {
    /** Slots per profile: two, so that a producer stages one while the consumers copy the other. */
    static final int SLOTS = 2;
    static final int MAGIC = 0x48435444; // "DTCH" little-endian
    static final int STATE_OPEN = 0;
    static final int STATE_FAILING = 1;
    static final int STATE_FAILED = 2;
    static final int STATE_CLOSED = 3;

    static final long MAGIC_OFFSET = 0;
    static final long CONSUMERS_OFFSET = 4;
    static final long PROFILES_OFFSET = 8;
    static final long QUEUE_CAPACITY_OFFSET = 12;
    static final long STATE_OFFSET = 16;
    static final long ACK_COUNTER_OFFSET = 20;
    static final long PRODUCER_PID_OFFSET = 24;
    static final long PRODUCER_TICKS_OFFSET = 32;
    private static final long CONSUMER_TABLE_OFFSET = 40;
    private static final long CONSUMER_ENTRY = 16;
    static final int MESSAGE_CAPACITY = 1024;
    /** Bytes of one completion event handle: a {@code cudaIpcEventHandle_t}. */
    static final int EVENT_HANDLE_BYTES = DeviceEvent.IPC_HANDLE_BYTES;

    static ChannelLayout of(ChannelOptions options) {
        return new ChannelLayout(options.consumerWorldSize(), options.maxProfiles(), options.refQueueBytes());
    }

    long consumerPidOffset(int rank) {
        return CONSUMER_TABLE_OFFSET + CONSUMER_ENTRY * rank;
    }

    long refCounterOffset(int rank) {
        return consumerPidOffset(rank) + 4;
    }

    long consumerTicksOffset(int rank) {
        return consumerPidOffset(rank) + 8;
    }

    long messageOffset() {
        return CONSUMER_TABLE_OFFSET + CONSUMER_ENTRY * consumers;
    }

    long acksOffset() {
        return BitUtil.align(messageOffset() + MESSAGE_CAPACITY, 64);
    }

    /** The offset of the ACK of {@code rank} for {@code slot} of {@code profile}. */
    long ackOffset(int profile, int slot, int rank) {
        return acksOffset() + 8L * (((long) profile * SLOTS + slot) * consumers + rank);
    }

    long eventsOffset() {
        return BitUtil.align(acksOffset() + 8L * profiles * SLOTS * consumers, 64);
    }

    /** The offset of the completion event handle of {@code rank} for {@code slot} of {@code profile}. */
    long eventHandleOffset(int profile, int slot, int rank) {
        return eventsOffset() + (long) EVENT_HANDLE_BYTES * (((long) profile * SLOTS + slot) * consumers + rank);
    }

    long queueOffset(int rank) {
        long start = BitUtil.align(eventsOffset() + (long) EVENT_HANDLE_BYTES * profiles * SLOTS * consumers, 64);
        return start + (long) rank * queueLength();
    }

    /** Bytes of one ref queue with its trailer. */
    int queueLength() {
        return queueCapacity + RingBufferDescriptor.TRAILER_LENGTH;
    }

    long size() {
        return queueOffset(consumers);
    }
}
