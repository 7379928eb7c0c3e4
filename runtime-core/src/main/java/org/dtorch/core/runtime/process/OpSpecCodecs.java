package org.dtorch.core.runtime.process;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.runtime.GetTensorSpec;
import org.dtorch.core.runtime.SyncSpec;

/**
 * Every {@link OpSpecCodec} of this JVM: the runtime's own ({@code get_tensor}, {@code sync}) and those
 * that modules register through {@link OpSpecCodecProvider}s, found once with {@link ServiceLoader}.
 *
 * <p>Thread-safe: built once, then read-only.
 */
public final class OpSpecCodecs {
    private static final Map<Class<?>, OpSpecCodec<?>> BY_CLASS = new HashMap<>();
    private static final Map<String, OpSpecCodec<?>> BY_TAG = new HashMap<>();

    static {
        register(new OpSpecCodec<GetTensorSpec>() {
            @Override
            public Class<GetTensorSpec> specClass() {
                return GetTensorSpec.class;
            }

            @Override
            public String tag() {
                return "runtime.get_tensor";
            }

            @Override
            public void write(GetTensorSpec spec, SpecWriter out) {
                out.promise(spec.promise());
            }

            @Override
            public GetTensorSpec read(SpecReader in) {
                return new GetTensorSpec(in.tensorPromise("get_tensor promise"));
            }
        });
        register(new OpSpecCodec<SyncSpec>() {
            @Override
            public Class<SyncSpec> specClass() {
                return SyncSpec.class;
            }

            @Override
            public String tag() {
                return "runtime.sync";
            }

            @Override
            public void write(SyncSpec spec, SpecWriter out) {
                out.promise(spec.promise());
                out.wire().putLong(spec.device());
            }

            @Override
            public SyncSpec read(SpecReader in) {
                var promise = in.voidPromise("sync promise");
                return new SyncSpec(promise, in.wire().getLong("sync device"));
            }
        });
        for (OpSpecCodecProvider provider : ServiceLoader.load(OpSpecCodecProvider.class)) {
            provider.codecs().forEach(OpSpecCodecs::register);
        }
    }

    private OpSpecCodecs() {
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
