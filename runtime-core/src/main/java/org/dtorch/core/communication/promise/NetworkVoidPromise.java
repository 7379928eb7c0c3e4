package org.dtorch.core.communication.promise;

import java.time.Duration;

/**
 * A {@link VoidPromise} whose future may live on another host.
 *
 * <p>Thread-safe: the claim is atomic in the store.
 */
final class NetworkVoidPromise extends NetworkPromise implements VoidPromise {

    NetworkVoidPromise(NetworkPromiseStore store, String key, boolean creator, Duration getTimeout) {
        super(store, key, creator, "VoidPromise", getTimeout);
    }

    @Override
    public void setValue() {
        if (!tryComplete(NetworkPromiseWire.encodeDone())) {
            throw alreadyCompleted("setValue");
        }
    }

    @Override
    public VoidFuture getFuture() {
        return NetworkFuture.ofVoid(takeFuture(), key, getTimeout);
    }
}
