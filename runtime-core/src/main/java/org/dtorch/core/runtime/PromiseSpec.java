package org.dtorch.core.runtime;

import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.Promise;
import org.dtorch.core.communication.promise.TensorPromise;
import org.dtorch.core.communication.promise.TensorPromiseType;
import org.dtorch.core.communication.promise.TensorPromises;
import org.dtorch.core.communication.promise.VoidPromise;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;

/**
 * An operator that carries a promise into the graph and completes it on one device: the way values and
 * completions come back to the client without it ever waiting for a kernel.
 *
 * <ul>
 *   <li>{@link #getTensor} (DTorch's {@code GetTensorOp}): the device that holds the one input sets the
 *   {@link TensorPromise}'s value to it, copied to the host. The input must live on a one-device mesh:
 *   {@code getTensorAsync} redistributes a distributed tensor there first.</li>
 *   <li>{@link #sync} (DTorch's {@code SyncFuture}, one per device, joined by a
 *   {@link org.dtorch.core.communication.promise.VoidFutureCollect}): completes a {@link VoidPromise} once
 *   everything queued to its device before it has run.</li>
 *   <li>{@link #memoryStats}: completes a {@link TensorPromise} with its device's {@link MemoryStats} once everything
 *   queued there before it has run, after resetting the peaks if asked.</li>
 * </ul>
 *
 * <p>A failure goes to the promise, or, for a spec rebuilt in a worker process, to the sink its codec gave
 * ({@link #reportingFailuresTo}): the fleet decides what the future reports, since only it knows whether a worker died.
 *
 * <p>Thread-safe: immutable; the promise is completed once, by the device.
 */
public final class PromiseSpec implements OpSpec {

    /** What completes the promise. */
    public enum Kind {
        /** The input's value, as a host tensor. */
        GET_TENSOR("get_tensor"),
        /** Nothing: the device ran everything queued before. */
        SYNC("sync"),
        /** The device's {@link MemoryStats} ({@link MemoryStats#toTensor()}). */
        MEMORY_STATS("memory_stats"),
        /** The device's {@link MemoryStats} after its peaks were reset. */
        RESET_PEAK_MEMORY_STATS("reset_peak_memory_stats");

        private final String opName;

        Kind(String opName) {
            this.opName = opName;
        }

        /** The operator's name. */
        public String opName() {
            return opName;
        }
    }

    /** The one place that knows which promise interface a kind completes. */
    private sealed interface Completion {
        Promise promise();

        void complete(KernelContext ctx, List<Tensor> inputs);
    }

    private record TensorCompletion(TensorPromise promise, boolean snapshot) implements Completion {
        @Override
        public void complete(KernelContext ctx, List<Tensor> inputs) {
            Tensor value = inputs.getFirst();
            if (!value.is_cuda()) {
                if (snapshot && promise.type() == TensorPromiseType.MEMORY) {
                    // A memory promise hands out the tensor itself: a copy keeps the value from later in-place writes.
                    try (Tensor copy = value.clone()) {
                        promise.setValue(copy);
                    }
                    return;
                }
                promise.setValue(value);
                return;
            }
            // The client gets a host tensor: copied on the worker's stream, synchronously, so the promise
            // completes when the copy is done.
            try (Tensor host = value.cpu()) {
                promise.setValue(host);
            }
        }
    }

    private record VoidCompletion(VoidPromise promise) implements Completion {
        @Override
        public void complete(KernelContext ctx, List<Tensor> inputs) {
            ctx.stream().synchronize();
            DeviceMemory memory = DeviceMemory.current();
            if (memory != null) {
                memory.atSync(); // before the client's sync() returns: a warning it causes is out by then
            }
            promise.setValue();
        }
    }

    private record MemoryCompletion(TensorPromise promise, boolean resetPeaks) implements Completion {
        @Override
        public void complete(KernelContext ctx, List<Tensor> inputs) {
            DeviceMemory memory = DeviceMemory.current();
            if (memory == null) {
                throw new IllegalStateException("memory statistics are read on a device's worker thread, not on " + Thread.currentThread());
            }
            if (resetPeaks) {
                memory.resetPeaks();
            }
            try (Tensor values = memory.stats().toTensor()) {
                promise.setValue(values);
            }
        }
    }

    private final Kind kind;
    private final Completion completion;
    /** The device a sync or memory query runs on; -1 for get_tensor, which runs where its input is. */
    private final long device;
    /** Where failures go instead of the promise (in a worker process), or null. */
    private final Consumer<Throwable> failureSink;

    private PromiseSpec(Kind kind, Completion completion, long device, Consumer<Throwable> failureSink) {
        this.kind = kind;
        this.completion = completion;
        this.device = device;
        this.failureSink = failureSink;
    }

    /** An operator that completes {@code promise} with its input's value. */
    public static PromiseSpec getTensor(TensorPromise promise) {
        return getTensor(promise, false);
    }

    /**
     * An operator that completes {@code promise} with its input's value; with {@code snapshot}, a value the promise would
     * hand out by reference (a memory promise, in this process) is copied first, because the input is a tensor the
     * program may still write in place.
     */
    public static PromiseSpec getTensor(TensorPromise promise, boolean snapshot) {
        return new PromiseSpec(Kind.GET_TENSOR, new TensorCompletion(Objects.requireNonNull(promise, "promise"), snapshot), -1, null);
    }

    /** A marker for {@code device} that completes {@code promise} once everything before it ran there. */
    public static PromiseSpec sync(VoidPromise promise, long device) {
        if (device < 0) {
            throw new IllegalArgumentException("sync: device must be >= 0, got " + device);
        }
        return new PromiseSpec(Kind.SYNC, new VoidCompletion(Objects.requireNonNull(promise, "promise")), device, null);
    }

    /**
     * An operator for {@code device} that completes {@code promise} with the device's {@link MemoryStats} once everything
     * before it ran there, resetting the peaks first if {@code resetPeaks}.
     */
    public static PromiseSpec memoryStats(TensorPromise promise, long device, boolean resetPeaks) {
        if (device < 0) {
            throw new IllegalArgumentException("memory_stats: device must be >= 0, got " + device);
        }
        return new PromiseSpec(resetPeaks ? Kind.RESET_PEAK_MEMORY_STATS : Kind.MEMORY_STATS,
            new MemoryCompletion(Objects.requireNonNull(promise, "promise"), resetPeaks), device, null);
    }

    /**
     * The same operator, which hands a failure (its kernel's, or an abandonment) to {@code sink} instead of setting
     * it on the promise.
     */
    public PromiseSpec reportingFailuresTo(Consumer<Throwable> sink) {
        return new PromiseSpec(kind, completion, device, Objects.requireNonNull(sink, "sink"));
    }

    /** What completes the promise. */
    public Kind kind() {
        return kind;
    }

    /** The device a {@link Kind#SYNC} or a memory query runs on; -1 for {@link Kind#GET_TENSOR}. */
    public long device() {
        return device;
    }

    /** The promise: a {@link VoidPromise} for {@link Kind#SYNC}, else a {@link TensorPromise}. */
    public Promise promise() {
        return completion.promise();
    }

    /** The promise's serialized form ({@link TensorPromise#serialize()}), for a codec. */
    public String serializedPromise() {
        return completion.promise().serialize();
    }

    /** The promise's type. */
    public TensorPromiseType promiseType() {
        return completion.promise().type();
    }

    @Override
    public String name() {
        return kind.opName();
    }

    @Override
    public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
        switch (kind) {
            case GET_TENSOR -> {
                if (inputs.size() != 1) {
                    throw new IllegalArgumentException("get_tensor takes one input, got " + inputs.size());
                }
                if (inputs.getFirst().sharding().mesh().count() != 1) {
                    throw new IllegalArgumentException("get_tensor needs a tensor on one device; " + inputs.getFirst()
                        + " is distributed: redistribute it to one device first");
                }
            }
            case SYNC, MEMORY_STATS, RESET_PEAK_MEMORY_STATS -> {
                if (!inputs.isEmpty()) {
                    throw new IllegalArgumentException(kind.opName() + " takes no input");
                }
            }
        }
        return List.of();
    }

    @Override
    public List<Long> devices(Operator op) {
        return device >= 0 ? List.of(device) : OpSpec.super.devices(op);
    }

    @Override
    public void abandon(Throwable cause) {
        if (failureSink != null) {
            failureSink.accept(cause);
        } else {
            TensorPromises.abandon(completion.promise(), cause);
        }
    }

    /** A value is copied to the host anyway, so one on a host mesh is fine. */
    @Override
    public boolean runsOnHostMeshes(Operator op) {
        return kind == Kind.GET_TENSOR;
    }

    @Override
    public DeviceKernel kernel(Operator op, long deviceId) {
        return new DeviceKernel() {
            @Override
            public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                completion.complete(ctx, inputs);
                return List.of();
            }

            @Override
            public void failed(KernelContext ctx, Throwable cause) {
                if (failureSink != null) {
                    failureSink.accept(cause);
                } else {
                    completion.promise().setException(cause);
                }
            }
        };
    }
}
