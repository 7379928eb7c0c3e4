package org.dtorch.core.communication.promise;

import java.time.Duration;
import org.dtorch.core.communication.CommOptions;
import java.lang.ref.Cleaner;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.dtorch.core.trace.Tracer;

/**
 * What the File tensor and void promises share: the region, the one future, serialization, and the
 * mapping's release. A promise made here ({@code creator}) gives out its future; a promise rebuilt from
 * its serialized name in another process only completes, and releases its mapping right after.
 *
 * <p>Thread-safe: completion is atomic in shared memory; taking the future is atomic here.
 */
abstract class FilePromise {
    static final Cleaner CLEANER = Cleaner.create();

    final FilePromiseRegion region;
    private final boolean creator;
    private final String name;
    private final AtomicBoolean futureTaken = new AtomicBoolean();
    private final Cleaner.Cleanable cleanable;
    /** The default deadline of the future's {@code get()}; null for the global timeout at the time of the call. */
    final Duration getTimeout;

    FilePromise(FilePromiseRegion region, boolean creator, String name, Duration getTimeout) {
        this.getTimeout = getTimeout == null ? null : CommOptions.validateTimeout(getTimeout);
        this.region = region;
        this.creator = creator;
        this.name = name;
        this.cleanable = CLEANER.register(this, region::release);
    }

    /** {@code setException}: completes with an error's text, or throws if already completed. */
    public final void setException(Throwable e) {
        Objects.requireNonNull(e, name + ".setException: error is null");
        if (!region.tryCompleteWithError(e)) {
            throw new IllegalStateException(name + ".setException: the promise is already completed", e);
        }
        completed();
    }

    /** Marks the future as taken; the second call, or any call on a rebuilt promise, throws. */
    final FilePromiseRegion takeFuture() {
        if (!creator) {
            throw new IllegalStateException(name + ".getFuture(): the future of a File promise lives in the process that created it");
        }
        if (!futureTaken.compareAndSet(false, true)) {
            throw new IllegalStateException(name + ".getFuture() was already called; a promise has exactly one future");
        }
        return region.share();
    }

    /** After a completion: a rebuilt promise has nothing left to do with the mapping. */
    final void completed() {
        Tracer.promiseCompleted(name);
        if (!creator) {
            cleanable.clean();
        }
    }

    final IllegalStateException alreadyCompleted(String method) {
        return new IllegalStateException(name + "." + method + ": the promise is already completed");
    }

    /**
     * Fails the promise if nobody completed it yet (or its completer died while writing it); false if it
     * was completed. For a controller whose worker died before running the operator.
     */
    public final boolean abandon(Throwable cause) {
        if (region.tryCompleteWithError(cause) || region.failIfWriterDied(cause)) {
            completed();
            return true;
        }
        return false;
    }

    /** {@code serialize}: the shared-memory region's name. */
    public final String serialize() {
        return region.name();
    }

    /** {@code type}: always FILE. */
    public final TensorPromiseType type() {
        return TensorPromiseType.FILE;
    }
}
