package org.dtorch.ops;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.dtorch.core.communication.channel.ChannelOptions;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.runtime.process.OpSpecCodec;
import org.dtorch.core.runtime.process.OpSpecCodecProvider;
import org.dtorch.core.runtime.process.ProtocolException;
import org.dtorch.core.runtime.process.SpecReader;
import org.dtorch.core.runtime.process.SpecWriter;
import org.dtorch.core.runtime.process.WireReader;
import org.dtorch.core.runtime.process.WireWriter;

/**
 * The codecs of this module's operators, for per-device-process mode: each writes the parameters its spec
 * was built from and rebuilds the spec through the same validating constructor or factory. Registered in
 * {@code META-INF/services/org.dtorch.core.runtime.process.OpSpecCodecProvider}.
 *
 * <p>Thread-safe: stateless.
 */
public final class OpsCodecs implements OpSpecCodecProvider {
    /** The most inputs one {@link RedistributeAllSpec} read from the wire may move (an operator's inputs are few). */
    private static final int MAX_MOVES = 4096;

    /** A codec from a writer and a reader function. */
    private record Codec<S extends OpSpec>(Class<S> specClass, String tag, BiConsumer<S, SpecWriter> writer,
                                           Function<SpecReader, S> reader) implements OpSpecCodec<S> {
        @Override
        public void write(S spec, SpecWriter out) {
            writer.accept(spec, out);
        }

        @Override
        public S read(SpecReader in) {
            return reader.apply(in);
        }
    }

    private static <E extends Enum<E>> E enumOf(WireReader in, Class<E> type, String what) {
        E[] values = type.getEnumConstants();
        return values[in.getByteIn(what, 0, values.length - 1)];
    }

    /** A channel's options, by which a worker attaches to it. */
    private static void writeChannel(ChannelOptions c, WireWriter out) {
        out.putString(c.instanceId()).putString(c.name()).putInt(c.consumerWorldSize()).putLong(c.timeout().toNanos())
            .putInt(c.maxProfiles()).putInt(c.refQueueBytes());
    }

    private static void writeRegion(Region r, WireWriter out) {
        boolean[] selected = r.selected();
        long[] flags = new long[selected.length];
        for (int d = 0; d < flags.length; d++) {
            flags[d] = selected[d] ? 1 : 0;
        }
        out.putLongs(r.starts()).putLongs(r.counts()).putLongs(r.steps()).putLongs(flags);
    }

    private static Region readRegion(WireReader in) {
        long[] starts = in.getLongs("region starts");
        long[] counts = in.getLongs("region counts");
        long[] steps = in.getLongs("region steps");
        long[] flags = in.getLongs("region selections");
        boolean[] selected = new boolean[flags.length];
        for (int d = 0; d < flags.length; d++) {
            selected[d] = flags[d] != 0;
        }
        return new Region(starts, counts, steps, selected);
    }

    /** An implicit move's operator name, or the empty string for an explicit move. */
    private static void writeImplicitFor(String implicitFor, WireWriter out) {
        out.putString(implicitFor == null ? "" : implicitFor);
    }

    private static String readImplicitFor(WireReader in) {
        String implicitFor = in.getString("redistribute implicit for");
        return implicitFor.isEmpty() ? null : implicitFor;
    }

    private static ChannelOptions readChannel(WireReader in) {
        return new ChannelOptions(in.getString("channel instance"), in.getString("channel name"), in.getInt("channel consumers"),
            Duration.ofNanos(in.getLong("channel timeout")), in.getInt("channel profiles"), in.getInt("channel queue bytes"));
    }

    @Override
    public List<OpSpecCodec<?>> codecs() {
        return List.of(
            new Codec<>(BinarySpec.class, "ops.binary", (s, out) -> out.wire().putByte(s.kind().ordinal()),
                in -> BinarySpec.of(enumOf(in.wire(), BinarySpec.Kind.class, "binary kind"))),
            new Codec<>(ScalarSpec.class, "ops.scalar", (s, out) -> {
                out.wire().putByte(s.kind().ordinal());
                s.value().write(out.wire());
            }, in -> ScalarSpec.restore(enumOf(in.wire(), ScalarSpec.Kind.class, "scalar kind"), ScalarValue.read(in.wire(), "scalar value"))),
            new Codec<>(UnarySpec.class, "ops.unary", (s, out) -> out.wire().putByte(s.kind().ordinal()),
                in -> UnarySpec.of(enumOf(in.wire(), UnarySpec.Kind.class, "unary kind"))),
            new Codec<>(ReduceSpec.class, "ops.reduce",
                (s, out) -> out.wire().putByte(s.kind().ordinal()).putInts(s.dims()).putBoolean(s.keepdim()),
                in -> new ReduceSpec(enumOf(in.wire(), ReduceSpec.Kind.class, "reduce kind"), in.wire().getInts("reduce dims"),
                    in.wire().getBoolean("reduce keepdim"))),
            new Codec<>(CastSpec.class, "ops.cast", (s, out) -> out.wire().putDtype(s.dtype()),
                in -> new CastSpec(in.wire().getDtype("cast dtype"))),
            new Codec<>(RedistributeSpec.class, "ops.redistribute", (s, out) -> {
                out.sharding(s.target());
                out.wire().putBoolean(s.channel() != null);
                if (s.channel() != null) {
                    writeChannel(s.channel(), out.wire());
                }
                writeImplicitFor(s.implicitFor(), out.wire());
            }, in -> {
                Sharding target = in.sharding("redistribute target");
                ChannelOptions channel = in.wire().getBoolean("redistribute through a channel") ? readChannel(in.wire()) : null;
                String implicitFor = readImplicitFor(in.wire());
                return implicitFor == null ? new RedistributeSpec(target, channel) : RedistributeSpec.implicit(target, implicitFor);
            }),
            new Codec<>(ChannelDetachSpec.class, "ops.channel_detach", (s, out) -> {
                writeChannel(s.channel(), out.wire());
                out.wire().putBoolean(s.producer()).putLongs(s.ranks().stream().mapToLong(Long::longValue).toArray());
            }, in -> new ChannelDetachSpec(readChannel(in.wire()), in.wire().getBoolean("channel detach side"),
                Arrays.stream(in.wire().getLongs("channel detach devices")).boxed().toList())),
            new Codec<>(RedistributeAllSpec.class, "ops.redistributeAll", (s, out) -> {
                out.wire().putInt(s.targets().size());
                s.targets().forEach(out::sharding);
                writeImplicitFor(s.implicitFor(), out.wire());
                out.wire().putBoolean(s.isGradientBucket());
            }, in -> {
                int count = in.wire().getIntIn("redistribute count", 1, MAX_MOVES);
                List<Sharding> targets = new ArrayList<>(count);
                for (int i = 0; i < count; i++) {
                    targets.add(in.sharding("redistribute target " + i));
                }
                String implicitFor = readImplicitFor(in.wire());
                boolean gradientBucket = in.wire().getBoolean("redistribute gradient bucket");
                if (gradientBucket && implicitFor != null) {
                    throw new ProtocolException("a gradient bucket's moves are not implicit moves for " + implicitFor);
                }
                return gradientBucket ? RedistributeAllSpec.gradientBucket(targets) : new RedistributeAllSpec(targets, implicitFor);
            }),
            new Codec<>(CopySpec.class, "ops.copy", (s, out) -> { }, in -> CopySpec.INSTANCE),
            new Codec<>(RingAttentionSpec.class, "ops.ring_attention",
                (s, out) -> out.wire().putBoolean(s.causal()).putDouble(s.scale()).putBoolean(s.enableGqa()),
                in -> new RingAttentionSpec(in.wire().getBoolean("ring attention causal"), in.wire().getDouble("ring attention scale"),
                    in.wire().getBoolean("ring attention enable_gqa"))),
            new Codec<>(AttentionGraphSpec.class, "ops.attention_graph", (s, out) -> AtenCallCodec.write(s.call(), out.wire()),
                in -> new AttentionGraphSpec(AtenCallCodec.read(in.wire()))),
            new Codec<>(AttentionBackwardSpec.class, "ops.attention_backward", (s, out) -> out.wire().putBoolean(s.retains()),
                in -> AttentionBackwardSpec.of(in.wire().getBoolean("attention backward retain"))),
            new Codec<>(AtenSpec.class, "ops.aten", (s, out) -> AtenCallCodec.write(s.call(), out.wire()),
                in -> new AtenSpec(AtenCallCodec.read(in.wire()))),
            new Codec<>(InPlaceSpec.class, "ops.inplace", (s, out) -> AtenCallCodec.write(s.call(), out.wire()),
                in -> new InPlaceSpec(AtenCallCodec.read(in.wire()))),
            new Codec<>(LocalForeachSpec.class, "ops.foreach", (s, out) -> AtenCallCodec.write(s.call(), out.wire()),
                in -> new LocalForeachSpec(AtenCallCodec.read(in.wire()))),
            new Codec<>(RegionWriteSpec.class, "ops.setitem", (s, out) -> {
                writeRegion(s.region(), out.wire());
                out.wire().putBoolean(s.scalar() != null);
                if (s.scalar() != null) {
                    s.scalar().write(out.wire());
                }
            }, in -> {
                Region region = readRegion(in.wire());
                return RegionWriteSpec.restore(region, in.wire().getBoolean("setitem number") ? ScalarValue.read(in.wire(), "setitem value") : null);
            }),
            new Codec<>(FactorySpec.class, "ops.factory", (s, out) -> {
                TensorMeta meta = s.output();
                out.wire().putByte(s.kind().ordinal()).putLongs(meta.shape()).putDtype(meta.dtype());
                out.sharding(meta.sharding());
                s.value().write(out.wire());
                s.start().write(out.wire());
                s.step().write(out.wire());
                out.wire().putLong(s.seed());
            }, in -> {
                FactorySpec.Kind kind = enumOf(in.wire(), FactorySpec.Kind.class, "factory kind");
                long[] shape = in.wire().getShape("factory shape");
                var dtype = in.wire().getDtype("factory dtype");
                var sharding = in.sharding("factory sharding");
                return FactorySpec.restore(kind, new TensorMeta(shape, dtype, sharding), ScalarValue.read(in.wire(), "factory value"),
                    ScalarValue.read(in.wire(), "factory start"), ScalarValue.read(in.wire(), "factory step"), in.wire().getLong("factory seed"));
            }),
            new Codec<>(FromTensorSpec.class, "ops.tensor", (s, out) -> {
                out.sharding(s.sharding());
                out.tensor(s.data());
            }, in -> {
                var sharding = in.sharding("tensor sharding");
                return FromTensorSpec.owningForOneDevice(in.tensor("tensor data"), sharding);
            }),
            new Codec<>(MaskIndexSpec.class, "ops.index_by_mask", (s, out) -> out.wire().putLong(s.count()),
                in -> new MaskIndexSpec(in.wire().getLong("index_by_mask count"))),
            new Codec<>(LocalShardSpec.class, "ops.local_shard", LocalShardSpec::write, LocalShardSpec::read),
            new Codec<>(AssembleShardsSpec.class, "ops.from_local", (s, out) -> {
                out.wire().putLongs(s.meta().shape()).putDtype(s.meta().dtype());
                out.sharding(s.meta().sharding());
            }, in -> {
                long[] shape = in.wire().getShape("from_local shape");
                var dtype = in.wire().getDtype("from_local dtype");
                return new AssembleShardsSpec(new TensorMeta(shape, dtype, in.sharding("from_local sharding")));
            }),
            new Codec<>(LocalValueSpec.class, "ops.to_local", (s, out) -> {
                out.promise(s.promise().type(), s.promise().serialize());
                out.wire().putLong(s.device());
            }, in -> {
                TensorPromise promise = in.promise("to_local promise", TensorPromises::fromSerialized,
                    () -> TensorPromises.create(TensorPromiseType.MEMORY));
                long device = in.wire().getLong("to_local device");
                if (device < 0) {
                    throw new ProtocolException("to_local device " + device + " is negative");
                }
                return LocalValueSpec.copying(promise, device, in.failureSink());
            }));
    }
}
