package org.dtorch.core.communication.store;

import java.time.Duration;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Producer-consumer exchange of tensors by key between the participants of one store
 * (docs/communication-core.md, TensorStore).
 *
 * <p>The four-step handshake: the producer calls {@link #srcSet} and later
 * {@link #srcWaitUntilGetFinished}; each of the {@code getCount} consumers calls {@link #destGet} and then
 * {@link #destFinishGet}. A key is <em>live</em> from {@code srcSet} until the producer's
 * {@code srcWaitUntilGetFinished} returns (or {@link #reset()}); afterwards it may be set again, so a
 * long-running exchange can reuse keys without resetting the store.
 *
 * <p>{@link #create(TensorStoreCreateInfo)} contains a barrier, as in DTorch: all {@code worldSize}
 * participants must create their instance at about the same time (within the timeout).
 *
 * <p>Ownership: the store keeps its own reference to a tensor set with {@code srcSet} and drops it when
 * the last consumer finishes; {@code destGet} returns a new reference that the caller owns (close it, or
 * let the garbage collector do it). The value is shared, not copied, in the memory backend: the producer
 * must not modify it until {@code srcWaitUntilGetFinished} returns, and a consumer that keeps using it
 * after {@code destFinishGet} must copy it.
 *
 * <p>Errors: bad input fails with {@link IllegalArgumentException} or {@link IllegalStateException} before
 * any state changes; a wait past the deadline fails with
 * {@link org.dtorch.core.communication.CommTimeoutException}; an interrupted wait fails with
 * {@link org.dtorch.core.communication.CommInterruptedException}. In every case the store stays usable
 * and nothing was taken or counted.
 *
 * <p>Thread-safe: any participant may call any method concurrently; one instance belongs to one
 * participant (rank).
 */
public abstract class TensorStore implements AutoCloseable {
    private final TensorStoreCreateInfo info;

    /** For subclasses: the validated creation info. */
    protected TensorStore(TensorStoreCreateInfo info) {
        this.info = Objects.requireNonNull(info, "info");
    }

    /**
     * Creates this participant's instance of the store named by {@code info} and waits (barrier) until
     * every participant has created its own.
     *
     * @throws IllegalArgumentException if a store of the same key exists with another world size
     */
    public static TensorStore create(TensorStoreCreateInfo info) {
        Objects.requireNonNull(info, "info");
        return switch (info.type()) {
            case MEMORY -> new MemoryTensorStore(info);
            case FILE -> new FileTensorStore(info);
            case NETWORK -> new NetworkTensorStore(info);
        };
    }

    /**
     * Creates this participant's instance with the backend its participants need, whatever
     * {@code info.type()} says: MEMORY when they are all threads of this process, FILE when they are processes of
     * one host, NETWORK when they are on several hosts.
     *
     * <p>With a {@linkplain TensorStoreCreateInfo#rendezvous() rendezvous}, the participants compare their
     * {@linkplain TensorStoreCreateInfo#hostId() host identities} and processes there ({@link ParticipantPlaces};
     * docs/communication-core.md, "Which backend"). Without one they can only be on one host, and they compare process
     * ids through shared memory ({@link IsSameProcessChecker}, as DTorch's same-device backend does).
     */
    public static TensorStore createForParticipants(TensorStoreCreateInfo info) {
        Objects.requireNonNull(info, "info");
        if (info.rendezvous() != null) {
            return create(info.toBuilder().type(ParticipantPlaces.backendFor(info)).build());
        }
        boolean sameProcess = IsSameProcessChecker.allInThisProcess(info);
        return create(info.toBuilder().type(sameProcess ? TensorStoreType.MEMORY : TensorStoreType.FILE).build());
    }

    /** Publishes {@code value} under {@code key} for {@code getCount} consumers. */
    public final void srcSet(String key, Tensor value, DeviceStream stream, int getCount) {
        srcSet(key, value, stream, getCount, null);
    }

    /**
     * Publishes {@code value} under {@code key} for {@code getCount} consumers.
     *
     * @param key               the name of the value in this store; must not be live
     * @param value             the tensor, on the device of {@code stream}
     * @param stream            the stream that produced {@code value}; consumers wait for it
     * @param getCount          how many consumers will {@link #destGet} it; at least 1
     * @param destGetDeviceKind where consumers will want it, or null for "where it is"; when it differs from
     *                          the tensor's device kind the value moves there before it is published
     * @throws IllegalArgumentException if an argument is invalid
     * @throws IllegalStateException    if {@code key} is still live or the store is closed
     */
    public abstract void srcSet(String key, Tensor value, DeviceStream stream, int getCount, DeviceKind destGetDeviceKind);

    /**
     * Blocks until all {@code getCount} consumers of {@code key} called {@link #destFinishGet}; the key
     * is then free to be set again.
     *
     * @throws IllegalStateException if {@code key} is not live
     */
    public abstract void srcWaitUntilGetFinished(String key, DeviceStream stream);

    /**
     * Blocks until a producer has set {@code key} and one of its {@code getCount} takes is still open, and
     * returns the value, synchronized with {@code stream}. The caller owns the returned reference.
     */
    public abstract Tensor destGet(String key, DeviceStream stream);

    /**
     * Tells the producer that this consumer is done with {@code key}; exactly one call per {@link #destGet}.
     *
     * @throws IllegalStateException if no {@code destGet} of {@code key} is outstanding
     */
    public abstract void destFinishGet(String key, DeviceStream stream);

    /**
     * {@link #destGet} followed by a move to {@code targetDevice}; on the same device kind nothing is
     * copied. The target is checked before anything is taken. The copy runs on the calling thread's current
     * stream, made to wait for {@code stream} first when that is another CUDA stream.
     */
    public Tensor destGetAndToDevice(String key, DeviceStream stream, Device targetDevice) {
        Objects.requireNonNull(targetDevice, "targetDevice");
        Cuda.require(targetDevice);
        Tensor value = destGet(key, stream);
        if (TorchTensors.device(value).equals(targetDevice) || (targetDevice.kind() == DeviceKind.CPU && !value.is_cuda())) {
            return value;
        }
        try (value) {
            if (stream.device().kind() == DeviceKind.CUDA && value.is_cuda()) {
                DeviceStream current = DeviceStream.of(stream.device());
                if (!current.equals(stream)) {
                    try (org.dtorch.core.device.DeviceEvent got = stream.recordEvent()) {
                        got.streamWaitEvent(current);
                    }
                }
            }
            return TorchTensors.to(value, targetDevice);
        }
    }

    /**
     * The copy of {@code value} that {@code srcSet} publishes for consumers on {@code target}: on the CPU, or on the
     * calling thread's current CUDA device. Made on the calling thread's current stream.
     */
    protected static Tensor moveForConsumers(String op, Tensor value, DeviceKind target) {
        Device device = target == DeviceKind.CPU ? Device.cpu(0) : Cuda.currentDevice();
        try {
            return TorchTensors.to(value, device);
        } catch (RuntimeException e) {
            throw new IllegalStateException(op + ": moving " + TorchTensors.describe(value) + " to " + device + " failed: "
                + e.getMessage(), e);
        }
    }

    /**
     * A new tensor, uninitialized, that this store can publish without copying and whose consumers alias
     * it: a write through what {@link #destGet} returned is seen by the producer and every other consumer.
     * The memory backend shares every tensor that way; the File backend allocates this one in shared memory.
     */
    public Tensor allocate(long[] shape, org.bytedeco.pytorch.global.torch.ScalarType dtype) {
        try (org.bytedeco.pytorch.TensorOptions options = new org.bytedeco.pytorch.TensorOptions()
            .dtype(new org.bytedeco.pytorch.ScalarTypeOptional(dtype))) {
            return org.bytedeco.pytorch.global.torch.empty(shape, options, new org.bytedeco.pytorch.MemoryFormatOptional());
        }
    }

    /**
     * The checks every backend's {@code srcSet} makes before touching its state: a stream, a defined value
     * on the stream's device kind, at least one consumer. Returns the value's device kind.
     */
    protected static DeviceKind checkSrcSet(String op, Tensor value, DeviceStream stream, int getCount) {
        Objects.requireNonNull(stream, () -> op + ": stream is null");
        if (value == null || value.isNull() || !value.defined()) {
            throw new IllegalArgumentException(op + ": value is " + org.dtorch.core.tensor.TorchTensors.describe(value));
        }
        if (getCount < 1) {
            throw new IllegalArgumentException(op + ": getCount must be >= 1, got " + getCount);
        }
        DeviceKind valueKind = org.dtorch.core.tensor.TorchTensors.deviceKind(value);
        if (valueKind != stream.device().kind()) {
            throw new IllegalArgumentException(op + ": value is " + org.dtorch.core.tensor.TorchTensors.describe(value) + " but stream is "
                + stream);
        }
        return valueKind;
    }

    /** Collective: barrier, drop every key and value, barrier. Every participant must call it. */
    public abstract void reset();

    /** Collective: blocks until all {@code worldSize} participants called it. Reusable. */
    public abstract void barrier();

    /**
     * Releases this participant's instance. Idempotent. Calls on a closed instance fail with
     * {@link IllegalStateException}; a thread blocked on this instance wakes with that exception.
     */
    @Override
    public abstract void close();

    /** The creation info of this instance. */
    public final TensorStoreCreateInfo info() {
        return info;
    }

    /** The key all participants share. */
    public final String storeKey() {
        return info.storeKey();
    }

    /** The number of participants. */
    public final int worldSize() {
        return info.worldSize();
    }

    /** This participant's rank. */
    public final int rank() {
        return info.rank();
    }

    /** The deadline of every blocking call. */
    public final Duration timeout() {
        return info.timeout();
    }

    /** The backend type. */
    public final TensorStoreType type() {
        return info.type();
    }
}
