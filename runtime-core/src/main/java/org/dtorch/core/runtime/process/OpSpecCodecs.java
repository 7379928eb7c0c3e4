package org.dtorch.core.runtime.process;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.runtime.PromiseSpec;

/**
 * Every {@link OpSpecCodec} of this JVM: the runtime's own ({@code get_tensor}, {@code sync}, the memory queries) and those
 * that modules register through {@link OpSpecCodecProvider}s, found once with {@link ServiceLoader}.
 *
 * <p>Thread-safe: built once, then read-only.
 */
public final class OpSpecCodecs {
    private static final Map<Class<?>, OpSpecCodec<?>> BY_CLASS = new HashMap<>();
    private static final Map<String, OpSpecCodec<?>> BY_TAG = new HashMap<>();

    static {
        register(new OpSpecCodec<PromiseSpec>() {
            @Override
            public Class<PromiseSpec> specClass() {
                return PromiseSpec.class;
            }

            @Override
            public String tag() {
                return "runtime.promise";
            }

            @Override
            public void write(PromiseSpec spec, SpecWriter out) {
                out.wire().putInt(spec.kind().ordinal());
                out.promise(spec.promiseType(), spec.serializedPromise());
                out.wire().putLong(spec.device());
            }

            @Override
            public PromiseSpec read(SpecReader in) {
                int ordinal = in.wire().getInt("promise kind");
                if (ordinal < 0 || ordinal >= PromiseSpec.Kind.values().length) {
                    throw new ProtocolException("promise kind " + ordinal + " is not one of " + List.of(PromiseSpec.Kind.values()));
                }
                PromiseSpec spec = switch (PromiseSpec.Kind.values()[ordinal]) {
                    case GET_TENSOR -> {
                        TensorPromise promise = tensorPromise(in, "get_tensor promise");
                        in.wire().getLong("get_tensor device");
                        yield PromiseSpec.getTensor(promise);
                    }
                    case MEMORY_STATS, RESET_PEAK_MEMORY_STATS -> {
                        TensorPromise promise = tensorPromise(in, "memory_stats promise");
                        long device = in.wire().getLong("memory_stats device");
                        if (device < 0) {
                            throw new ProtocolException("memory_stats device " + device + " is negative");
                        }
                        yield PromiseSpec.memoryStats(promise, device, PromiseSpec.Kind.values()[ordinal] == PromiseSpec.Kind.RESET_PEAK_MEMORY_STATS);
                    }
                    case SYNC -> {
                        VoidPromise promise = in.promise("sync promise", TensorPromises::voidFromSerialized,
                            () -> TensorPromises.createVoid(TensorPromiseType.MEMORY));
                        yield PromiseSpec.sync(promise, in.wire().getLong("sync device"));
                    }
                };
                return spec.reportingFailuresTo(in.failureSink());
            }
        });
        for (OpSpecCodecProvider provider : ServiceLoader.load(OpSpecCodecProvider.class)) {
            provider.codecs().forEach(OpSpecCodecs::register);
        }
    }

    private OpSpecCodecs() {
    }

    /** A tensor promise as {@link SpecWriter#promise} wrote it. */
    private static TensorPromise tensorPromise(SpecReader in, String what) {
        return in.promise(what, TensorPromises::fromSerialized,
            () -> TensorPromises.create(TensorPromiseType.MEMORY));
    }

    private static void register(OpSpecCodec<?> codec) {
        OpSpecCodec<?> previous = BY_TAG.putIfAbsent(codec.tag(), codec);
        if (previous != null && previous.specClass() != codec.specClass()) {
            throw new IllegalStateException("two operator codecs use the tag '" + codec.tag() + "': " + previous.specClass().getName()
                + " and " + codec.specClass().getName());
        }
        BY_CLASS.put(codec.specClass(), codec);
    }

    /**
     * The codec of {@code spec}'s class.
     *
     * @throws IllegalArgumentException if there is none: the operator cannot run in a worker process
     */
    @SuppressWarnings("unchecked")
    public static <S extends OpSpec> OpSpecCodec<S> require(S spec) {
        OpSpecCodec<?> codec = BY_CLASS.get(spec.getClass());
        if (codec == null) {
            throw new IllegalArgumentException("operator '" + spec.name() + "' (" + spec.getClass().getName()
                + ") cannot run in per-device-process mode: it has no codec to cross to the worker processes; register one through "
                + OpSpecCodecProvider.class.getSimpleName());
        }
        return (OpSpecCodec<S>) codec;
    }

    /** The codec with {@code tag}, for decoding. */
    static OpSpecCodec<?> byTag(String tag) {
        OpSpecCodec<?> codec = BY_TAG.get(tag);
        if (codec == null) {
            throw new ProtocolException("unknown operator tag '" + tag + "' (a codec missing from this worker's class path?)");
        }
        return codec;
    }

    /** The tags known here, for diagnostics. */
    public static List<String> tags() {
        return BY_TAG.keySet().stream().sorted().toList();
    }
}
