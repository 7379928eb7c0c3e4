package org.dtorch.core.communication.channel;

import java.time.Duration;
import org.dtorch.core.communication.CommOptions;

/**
 * The settings of one {@link WorkerTensorChannel}, the same in the creator, the producer and every consumer: they
 * name the channel's shared memory and fix its layout.
 *
 * <p>Thread-safe: an immutable value.
 *
 * @param instanceId        the runtime's instance id ({@code GlobalCommInstanceId}); it prefixes every file
 * @param name              the channel's name, unique within the instance
 * @param consumerWorldSize the number of consumer ranks, fixed at creation
 * @param timeout           the deadline of every blocking call (waits for ACKs, for refs, for queue space)
 * @param maxProfiles       persistent (shape, dtype) profiles kept per channel; later profiles go through a fresh
 *                          region per transfer (default {@value #DEFAULT_MAX_PROFILES})
 * @param refQueueBytes     the capacity of each consumer's queue of refs, a power of two (default
 *                          {@value #DEFAULT_REF_QUEUE_BYTES}); a ref may take at most an eighth of it
 */
public record ChannelOptions(String instanceId, String name, int consumerWorldSize, Duration timeout, int maxProfiles,
                             int refQueueBytes) {
    /** Profiles kept per channel unless told otherwise: TeleFuser's bound on resident pool memory. */
    public static final int DEFAULT_MAX_PROFILES = 8;
    /** Bytes of each consumer's ref queue unless told otherwise. */
    public static final int DEFAULT_REF_QUEUE_BYTES = 64 * 1024;

    /** Checks every field. */
    public ChannelOptions {
        if (instanceId == null || instanceId.isEmpty() || name == null || name.isEmpty()) {
            throw new IllegalArgumentException("a channel needs an instance id and a name, got '" + instanceId + "' and '" + name + "'");
        }
        if (consumerWorldSize < 1 || consumerWorldSize > 1024) {
            throw new IllegalArgumentException("channel '" + name + "': consumer world size must be 1 to 1024, got " + consumerWorldSize);
        }
        CommOptions.validateTimeout(timeout);
        if (maxProfiles < 0 || maxProfiles > 64) {
            throw new IllegalArgumentException("channel '" + name + "': max profiles must be 0 to 64, got " + maxProfiles);
        }
        if (refQueueBytes < 1024 || Integer.bitCount(refQueueBytes) != 1) {
            throw new IllegalArgumentException("channel '" + name + "': the ref queue needs a power of two of at least 1024 bytes, got "
                + refQueueBytes);
        }
    }

    /** Options with the default profile count and queue size, and the global timeout. */
    public static ChannelOptions of(String instanceId, String name, int consumerWorldSize) {
        return new ChannelOptions(instanceId, name, consumerWorldSize, CommOptions.global().timeout(), DEFAULT_MAX_PROFILES,
            DEFAULT_REF_QUEUE_BYTES);
    }

    /** These options with another timeout. */
    public ChannelOptions withTimeout(Duration newTimeout) {
        return new ChannelOptions(instanceId, name, consumerWorldSize, newTimeout, maxProfiles, refQueueBytes);
    }

    /** These options with another profile bound. */
    public ChannelOptions withMaxProfiles(int newMaxProfiles) {
        return new ChannelOptions(instanceId, name, consumerWorldSize, timeout, newMaxProfiles, refQueueBytes);
    }
}
