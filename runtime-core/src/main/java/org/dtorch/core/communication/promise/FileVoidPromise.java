package org.dtorch.core.communication.promise;

import java.time.Duration;

/**
 * A {@link VoidPromise} whose future may live in another process of this host.
 *
 * <p>Thread-safe: completion is a compare-and-set in shared memory.
 */
final class FileVoidPromise extends FilePromise implements VoidPromise {

    FileVoidPromise(FilePromiseRegion region, boolean creator, Duration getTimeout) {
        super(region, creator, "VoidPromise", getTimeout);
    }

    @Override
    public void setValue() {
        if (!region.tryCompleteWithoutValue()) {
            throw alreadyCompleted("setValue");
        }
        completed();
    }

    @Override
    public VoidFuture getFuture() {
        return FileFuture.ofVoid(takeFuture(), getTimeout);
    }
}
