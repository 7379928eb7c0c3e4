package org.dtorch.core.communication.promise;

import java.time.Duration;
import java.util.Objects;

/**
 * Factories of promises (docs/communication-core.md, Promises and futures).
 *
 * <p>Thread-safe: stateless.
 */
public final class TensorPromises {

    private TensorPromises() {
    }

    /**
     * A new tensor promise of the given backend. A FILE promise creates its shared-memory region now; a NETWORK one
     * starts a {@code TCPStore} server of its own ({@link NetworkPromises} for a shared store).
     */
    public static TensorPromise create(TensorPromiseType type) {
        return create(type, null);
    }

    /**
     * As {@link #create(TensorPromiseType)}, with the deadline of its future's {@code get()} (a runtime's
     * timeout); null for the global communication timeout at the time of the call.
     */
    public static TensorPromise create(TensorPromiseType type, Duration getTimeout) {
        return create(type, getTimeout, null);
    }

    /**
     * As {@link #create(TensorPromiseType, Duration)}, for a value of known shape and dtype ({@code expected}, or null
     * when unknown): a File future's getter that has to sleep then allocates the value first, so that it makes no native
     * call once woken. A value of another shape or dtype is still taken.
     */
    public static TensorPromise create(TensorPromiseType type, Duration getTimeout, ExpectedValue expected) {
        return switch (Objects.requireNonNull(type, "type")) {
            case MEMORY -> new MemoryTensorPromise(getTimeout);
            case FILE -> new FileTensorPromise(FilePromiseRegion.create(FilePromiseLayout.TENSOR), true, getTimeout, expected);
            case NETWORK -> NetworkPromises.hosted(getTimeout);
        };
    }

    /**
     * Rebuilds, in this process, a promise serialized in another one; it can be completed, not awaited
     * (the future stays with the creator).
     *
     * @throws IllegalArgumentException for MEMORY, which never crosses a process, or data that is not a promise of {@code type}
     * @throws IllegalStateException    if a File promise's shared memory is gone (its future was dropped)
     */
    public static TensorPromise fromSerialized(TensorPromiseType type, String data) {
        return switch (checkRebuild(type, data)) {
            case FILE -> new FileTensorPromise(FilePromiseRegion.attach(data, FilePromiseLayout.TENSOR), false, null, null);
            case NETWORK -> NetworkPromises.tensorFromSerialized(data);
            default -> throw new AssertionError(type);
        };
    }

    /** A new void promise of the given backend. */
    public static VoidPromise createVoid(TensorPromiseType type) {
        return createVoid(type, null);
    }

    /** As {@link #createVoid(TensorPromiseType)}, with the deadline of its future's {@code get()}; see {@link #create(TensorPromiseType, Duration)}. */
    public static VoidPromise createVoid(TensorPromiseType type, Duration getTimeout) {
        return switch (Objects.requireNonNull(type, "type")) {
            case MEMORY -> new MemoryVoidPromise(getTimeout);
            case FILE -> new FileVoidPromise(FilePromiseRegion.create(FilePromiseLayout.VOID), true, getTimeout);
            case NETWORK -> NetworkPromises.hostedVoid(getTimeout);
        };
    }

    /** Rebuilds a void promise serialized in another process; see {@link #fromSerialized}. */
    public static VoidPromise voidFromSerialized(TensorPromiseType type, String data) {
        return switch (checkRebuild(type, data)) {
            case FILE -> new FileVoidPromise(FilePromiseRegion.attach(data, FilePromiseLayout.VOID), false, null);
            case NETWORK -> NetworkPromises.voidFromSerialized(data);
            default -> throw new AssertionError(type);
        };
    }

    /**
     * Fails {@code promise} with {@code cause} unless it was completed already (for File promises, also
     * when its completer died while writing); true if it did. A controller calls it for operators that
     * will never run.
     */
    public static boolean abandon(Promise promise, Throwable cause) {
        if (promise instanceof FilePromise file) {
            return file.abandon(cause);
        }
        if (promise instanceof NetworkPromise network) {
            return network.abandon(cause);
        }
        if (promise instanceof MemoryPromise<?> memory) {
            return memory.completion.completeExceptionally(cause);
        }
        throw new IllegalArgumentException("not a promise: " + promise);
    }

    private static TensorPromiseType checkRebuild(TensorPromiseType type, String data) {
        Objects.requireNonNull(data, "data");
        return switch (Objects.requireNonNull(type, "type")) {
            case MEMORY -> throw new IllegalArgumentException(
                "a MEMORY promise cannot be rebuilt from serialized data ('" + data + "'); it never leaves its process");
            case FILE, NETWORK -> type;
        };
    }
}
