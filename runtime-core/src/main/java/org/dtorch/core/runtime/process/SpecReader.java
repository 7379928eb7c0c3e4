package org.dtorch.core.runtime.process;

import java.util.function.Consumer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidFuture;
import org.dtorch.core.communication.promise.VoidPromise;
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
     * The File tensor promise written by {@link SpecWriter#promise(TensorPromise)}, attached in this process.
     * Its value goes straight to the future; an error goes to the controller instead, which decides what the
     * future reports (the death of a worker, when one died, names the device and its exit status). If the
     * future is gone already, the value is dropped.
     */
    public TensorPromise tensorPromise(String what) {
        String name = in.getString(what);
        TensorPromise target = attach(what, name, n -> TensorPromises.fromSerialized(TensorPromiseType.FILE, n),
            () -> TensorPromises.create(TensorPromiseType.MEMORY));
        return new TensorPromise() {
            @Override
            public void setValue(Tensor t) {
                target.setValue(t);
            }

            @Override
            public void setException(Throwable e) {
                failureSink.accept(e);
            }

            @Override
            public TensorFuture getFuture() {
                throw new IllegalStateException("the future of " + name + " lives in the controller");
            }

            @Override
            public String serialize() {
                return name;
            }

            @Override
            public TensorPromiseType type() {
                return TensorPromiseType.FILE;
            }
        };
    }

    /** The File void promise written by {@link SpecWriter#promise(VoidPromise)}; see {@link #tensorPromise}. */
    public VoidPromise voidPromise(String what) {
        String name = in.getString(what);
        VoidPromise target = attach(what, name, n -> TensorPromises.voidFromSerialized(TensorPromiseType.FILE, n),
            () -> TensorPromises.createVoid(TensorPromiseType.MEMORY));
        return new VoidPromise() {
            @Override
            public void setValue() {
                target.setValue();
            }

            @Override
            public void setException(Throwable e) {
                failureSink.accept(e);
            }

            @Override
            public VoidFuture getFuture() {
                throw new IllegalStateException("the future of " + name + " lives in the controller");
            }

            @Override
            public String serialize() {
                return name;
            }

            @Override
            public TensorPromiseType type() {
                return TensorPromiseType.FILE;
            }
        };
    }

    /**
     * Attaches to promise {@code name}; a name that is not a promise's is a protocol error, a promise whose
     * future is gone gives {@code discard} (what the worker sets is dropped).
     */
    private static <P> P attach(String what, String name, java.util.function.Function<String, P> attach,
                                java.util.function.Supplier<P> discard) {
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
