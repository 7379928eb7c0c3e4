package org.dtorch.core.kernel;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.core.communication.channel.ChannelConsumer;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.channel.ChannelProducer;
import org.dtorch.core.communication.channel.WorkerTensorChannel;

/**
 * This process's attachments to runtime channels: the producer of a channel (on its source mesh's first device) and
 * one consumer per destination device, attached on first use and kept, by channel, until the runtime detaches them
 * with an operator ({@link #closeProducer}, {@link #closeConsumer}) on the thread that uses the end. A worker process
 * holds only its own device's ends; in thread mode every device's ends live here, each used by its device's worker
 * thread only. Nothing else closes an end: its mapping may be in use by that thread (an end whose detach never ran,
 * because the runtime closed while its device was stuck, keeps its mapping until the process exits; the channel's
 * files are removed all the same).
 *
 * <p>Thread-safe: the map is concurrent; each end is used by one worker thread.
 */
public final class ChannelEnds {
    /** An end: the producer ({@code rank} {@value #PRODUCER}) or consumer {@code rank} of one channel. */
    private record End(ChannelOptions options, int rank) {
    }

    private static final int PRODUCER = -1;
    private static final Map<End, AutoCloseable> ENDS = new ConcurrentHashMap<>();

    private ChannelEnds() {
    }

    /** The producer of {@code options}' channel in this process, attached on first use. */
    static ChannelProducer producer(ChannelOptions options) {
        return (ChannelProducer) ENDS.computeIfAbsent(new End(options, PRODUCER), e -> WorkerTensorChannel.producer(options));
    }

    /** Consumer {@code rank} of {@code options}' channel in this process, attached on first use. */
    static ChannelConsumer consumer(ChannelOptions options, int rank) {
        return (ChannelConsumer) ENDS.computeIfAbsent(new End(options, rank), e -> WorkerTensorChannel.consumer(options, rank));
    }

    /** Detaches this process's producer of the channel, if attached: consumers waiting for a ref then fail at once. */
    public static void closeProducer(ChannelOptions options) {
        close(new End(options, PRODUCER));
    }

    /** Detaches consumer {@code rank} of the channel, if attached here. */
    public static void closeConsumer(ChannelOptions options, int rank) {
        close(new End(options, rank));
    }

    private static void close(End end) {
        AutoCloseable attached = ENDS.remove(end);
        if (attached != null) {
            try {
                attached.close();
            } catch (Exception e) {
                throw new IllegalStateException("detaching " + (end.rank == PRODUCER ? "the producer" : "consumer rank " + end.rank)
                    + " of channel '" + end.options.name() + "' failed: " + e, e);
            }
        }
    }
}
