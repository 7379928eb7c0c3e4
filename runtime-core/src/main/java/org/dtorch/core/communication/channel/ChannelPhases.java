package org.dtorch.core.communication.channel;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * Where a hand-off's time goes: the durations of the phases of {@link ChannelProducer#publish},
 * {@link ChannelProducer#enqueue} and {@link ChannelConsumer#resolve}, taken with {@link System#nanoTime()} in this
 * process while {@linkplain #enable enabled} (off by default: then each phase costs one volatile read). For probes
 * such as the benchmarks' {@code ChannelCudaProbe}; each phase keeps its last {@value #CAPACITY} samples.
 *
 * <p>Thread-safe: any thread may record or drain; a drain racing a record may miss that sample.
 */
public final class ChannelPhases {
    /** The measured phases, in the order a hand-off runs them. */
    public enum Phase {
        /** Producer: the host wait for every rank's ACK of the slot's previous generation. */
        ACK_WAIT,
        /** Producer, CUDA: its stream's waits on the consumers' completion events (queries, liveness, waits). */
        CONSUMER_EVENTS,
        /** Producer: the copy into the slot (on CUDA its launch). */
        STAGE_COPY,
        /** Producer, CUDA: recording the slot's ready event. */
        READY_RECORD,
        /** Producer: the leaf's handles and the ref's leaf. */
        HANDLES,
        /** Producer: {@code enqueue}, serializing the ref, writing each rank's queue and waking it. */
        ENQUEUE,
        /** Consumer: finding (or, the first time, opening) the profile's storage. */
        OPEN,
        /** Consumer, CUDA: the ready event's query and its stream's wait on it. */
        READY_WAIT,
        /** Consumer: allocating the tensor it copies into. */
        EMPTY,
        /** Consumer: the copy out (on CUDA its launch). */
        COPY_OUT,
        /** Consumer, CUDA: recording its completion event. */
        COMPLETION_RECORD,
        /** Consumer: publishing the ACK and waking the producer. */
        ACK
    }

    /** Samples kept per phase; older ones are overwritten. */
    public static final int CAPACITY = 1 << 14;
    private static final Phase[] PHASES = Phase.values();
    private static final long[][] SAMPLES = new long[PHASES.length][CAPACITY];
    private static final AtomicIntegerArray COUNTS = new AtomicIntegerArray(PHASES.length);
    private static volatile boolean enabled;

    private ChannelPhases() {
    }

    /** Starts ({@code true}) or stops recording in this process. */
    public static void enable(boolean on) {
        enabled = on;
    }

    /** The durations recorded for {@code phase} since the last drain, in nanoseconds, oldest first; then forgets them. */
    public static long[] drain(Phase phase) {
        int n = COUNTS.getAndSet(phase.ordinal(), 0);
        long[] ring = SAMPLES[phase.ordinal()];
        long[] out = new long[Math.min(n, CAPACITY)];
        for (int i = 0; i < out.length; i++) {
            out[i] = ring[(n - out.length + i) % CAPACITY];
        }
        return out;
    }

    /** Forgets every phase's samples. */
    public static void clear() {
        Arrays.stream(PHASES).forEach(ChannelPhases::drain);
    }

    /** The clock at a phase's start, or 0 while not recording. */
    static long start() {
        return enabled ? System.nanoTime() : 0;
    }

    /** Records {@code phase} as started at {@code start} (nothing if 0) and returns the clock now, the next phase's start. */
    static long end(Phase phase, long start) {
        if (start == 0) {
            return 0;
        }
        long now = System.nanoTime();
        int i = COUNTS.getAndIncrement(phase.ordinal());
        SAMPLES[phase.ordinal()][i % CAPACITY] = now - start;
        return now;
    }
}
