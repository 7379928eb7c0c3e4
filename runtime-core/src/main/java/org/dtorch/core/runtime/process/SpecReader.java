package org.dtorch.core.runtime.process;

import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.distributed.Sharding;

/**
 * What an {@link OpSpecCodec} reads through, in the worker: the wire primitives, shardings and tensors,
 * each checked as it is read.
 *
 * <p>Not thread-safe: one thread reads one operator.
 */
public final class SpecReader {
    private static final System.Logger LOG = System.getLogger(SpecReader.class.getName());
    private final WireReader in;
    private final Consumer<Throwable> failureSink;

    SpecReader(WireReader in, Consumer<Throwable> failureSink) {
        this.in = in;
        this.failureSink = failureSink;
    }

    /** The wire primitives. */
    public WireReader wire() {
        return in;
    }

    /** A sharding written by {@link SpecWriter#sharding}. */
    public Sharding sharding(String what) {
        return MetaCodec.readSharding(in, what);
    }

    /**
     * The promise written by {@link SpecWriter#promise}, attached in this process through {@code attach} (for
     * example {@link TensorPromises#fromSerialized}), given its type (FILE or NETWORK) and serialized form. A name that is
     * not a promise's is a protocol error; if the future is gone already, {@code discard} gives a promise whose value is
     * dropped. Its value goes straight to the
     * future; an error goes to {@link #failureSink()} instead.
     */
    public <P> P promise(String what, BiFunction<TensorPromiseType, String, P> attach, Supplier<P> discard) {
        int ordinal = in.getInt(what + " type");
        if (ordinal != TensorPromiseType.FILE.ordinal() && ordinal != TensorPromiseType.NETWORK.ordinal()) {
            throw new ProtocolException(what + ": promise type " + ordinal + " is neither FILE nor NETWORK");
        }
        TensorPromiseType type = TensorPromiseType.values()[ordinal];
        return attach(what, in.getString(what), name -> attach.apply(type, name), discard);
    }

    /**
     * Where the operator's promise errors go: to the controller, which decides what the future reports (the death
     * of a worker, when one died, names the device and its exit status).
     */
    public Consumer<Throwable> failureSink() {
        return failureSink;
    }

    /**
     * Attaches to promise {@code name}; a name that is not a promise's is a protocol error, a promise whose
     * future is gone gives {@code discard} (what the worker sets is dropped).
     */
    private static <P> P attach(String what, String name, Function<String, P> attach, Supplier<P> discard) {
        try {
            return attach.apply(name);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(what + ": " + e.getMessage(), e);
        } catch (IllegalStateException gone) {
            LOG.log(System.Logger.Level.DEBUG, () -> what + ": " + gone.getMessage() + "; what the worker sets will be dropped");
            return discard.get();
        }
    }

    /** A tensor written by {@link SpecWriter#tensor}, as a new tensor the caller owns. */
    public Tensor tensor(String what) {
        return in.getTensor(what);
    }
}
