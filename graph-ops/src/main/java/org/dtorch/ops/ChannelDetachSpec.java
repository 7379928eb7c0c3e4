package org.dtorch.ops;

import java.util.List;
import java.util.Objects;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.ChannelEnds;

/**
 * Detaches one side of a runtime channel on the devices that hold it ({@link ChannelEnds}), in program order after
 * every transfer queued before: the consumers on the destination mesh's devices, or the producer on the source mesh's
 * first device. Closing a declared edge queues the consumers' detach, then the producer's, then closes the channel
 * (TeleFuser's shutdown order: no consumer finds its producer gone while a transfer is due). No operands.
 *
 * <p>Thread-safe: immutable.
 *
 * @param channel  the channel
 * @param producer true for the producer's side, false for the consumers'
 * @param ranks    the devices of that side in rank order: the destination mesh's devices, or the one producer device
 */
public record ChannelDetachSpec(ChannelOptions channel, boolean producer, List<Long> ranks) implements OpSpec {

    /** Checks the components. */
    public ChannelDetachSpec {
        Objects.requireNonNull(channel, "channel");
        ranks = List.copyOf(ranks);
        if (ranks.isEmpty() || producer && ranks.size() != 1) {
            throw new IllegalArgumentException("channel '" + channel.name() + "': a detach needs " + (producer ? "one producer device" : "the consumer devices")
                + ", got " + ranks);
        }
    }

    @Override
    public String name() {
        return producer ? "channel_detach_producer" : "channel_detach_consumers";
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        Rules.arity(name(), inputs, 0);
        return List.of();
    }

    @Override
    public List<Long> devices(Operator op) {
        return ranks.stream().sorted().toList();
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return (ctx, inputs) -> {
            if (producer) {
                ChannelEnds.closeProducer(channel);
            } else {
                ChannelEnds.closeConsumer(channel, ranks.indexOf(deviceId));
            }
            return List.of();
        };
    }
}
