package org.dtorch.core.communication.promise;

import java.lang.ref.Cleaner;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.bytedeco.pytorch.ByteVector;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.trace.Tracer;

/**
 * What the Network tensor and void promises share (docs/communication-core.md, Promises and futures): a key in a c10d
 * {@code TCPStore}, the one future, serialization, and completion. The creator gives out the future; a promise rebuilt
 * from {@link #serialize()} in another process (or on another host) only completes.
 *
 * <p>Completing is two store calls on a client of its own: {@code add(key/claim, 1)}, which only the first completer
 * sees return 1 (so exactly one of {@code setValue} and {@code setException} wins, across hosts), then {@code set(key,
 * outcome)}, which wakes the future's waiter ({@link NetworkPromiseWire} draws the outcome's bytes).
 *
 * <p>Thread-safe: the claim is atomic in the store; taking the future is atomic here.
 */
abstract class NetworkPromise {
    /** How {@link #serialize()} begins: {@code tcp://host:port/key}. */
    static final String SCHEME = "tcp://";
    /** Every promise's key begins so. */
    static final String KEY_PREFIX = "dtorch/promise/";

    final NetworkPromiseStore store;
    final String key;
    private final boolean creator;
    private final String name;
    private final AtomicBoolean futureTaken = new AtomicBoolean();
    private final Cleaner.Cleanable cleanable;
    /** The default deadline of the future's {@code get()}; null for the global timeout at the time of the call. */
    final Duration getTimeout;

    NetworkPromise(NetworkPromiseStore store, String key, boolean creator, String name, Duration getTimeout) {
        this.getTimeout = getTimeout == null ? null : CommOptions.validateTimeout(getTimeout);
        this.store = store;
        this.key = key;
        this.creator = creator;
        this.name = name;
        this.cleanable = FilePromise.CLEANER.register(this, store::release);
    }

    /** A fresh key, unique across hosts and runs. */
    static String newKey() {
        return KEY_PREFIX + UUID.randomUUID();
    }

    /** The store and key that {@code data}, written by {@link #serialize()}, names. */
    record Address(String host, int port, String key) {
    }

    /**
     * Parses {@code tcp://host:port/dtorch/promise/<id>}.
     *
     * @throws IllegalArgumentException naming {@code data} if it is not a Network promise's serialized form
     */
    static Address parse(String data) {
        int slash = data.indexOf('/', SCHEME.length());
        int colon = slash < 0 ? -1 : data.lastIndexOf(':', slash);
        if (!data.startsWith(SCHEME) || colon < SCHEME.length() || !data.startsWith(KEY_PREFIX, slash + 1)
            || data.length() == slash + 1 + KEY_PREFIX.length()) {
            throw new IllegalArgumentException("'" + data + "' is not a Network promise (expected " + SCHEME + "host:port/" + KEY_PREFIX + "<id>)");
        }
        try {
            return new Address(data.substring(SCHEME.length(), colon), Integer.parseInt(data.substring(colon + 1, slash)), data.substring(slash + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + data + "' names no port number", e);
        }
    }

    /** {@code setException}: completes with an error's kind and text, or throws if already completed. */
    public final void setException(Throwable e) {
        Objects.requireNonNull(e, name + ".setException: error is null");
        if (!tryComplete(NetworkPromiseWire.encodeError(e))) {
            throw new IllegalStateException(name + ".setException: the promise is already completed (key " + key + ")", e);
        }
    }

    /** Claims the promise and writes {@code outcome} under its key; false if another completer claimed it first. */
    final boolean tryComplete(byte[] outcome) {
        Duration timeout = CommOptions.global().timeout();
        try {
            boolean claimed = store.call(timeout, client -> {
                if (client.add(key + "/claim", 1) != 1) {
                    return false;
                }
                try (ByteVector bytes = new ByteVector(outcome)) {
                    client.set(key, bytes);
                }
                return true;
            });
            if (!claimed) {
                return false;
            }
        } catch (CommException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new CommException(name + " completing key " + key + " in the TCPStore at " + store + " failed: " + e.getMessage(), e);
        }
        Tracer.promiseCompleted(name);
        if (!creator) {
            cleanable.clean();
        }
        return true;
    }

    /** Marks the future as taken and gives it a reference to the store; the second call, or any on a rebuilt promise, throws. */
    final NetworkPromiseStore takeFuture() {
        if (!creator) {
            throw new IllegalStateException(name + ".getFuture(): the future of a Network promise lives in the process that created it (key "
                + key + ")");
        }
        if (!futureTaken.compareAndSet(false, true)) {
            throw new IllegalStateException(name + ".getFuture() was already called; a promise has exactly one future");
        }
        return store.share();
    }

    final IllegalStateException alreadyCompleted(String method) {
        return new IllegalStateException(name + "." + method + ": the promise is already completed (key " + key + ")");
    }

    /** Fails the promise if nobody completed it yet; false if it was completed. */
    public final boolean abandon(Throwable cause) {
        return tryComplete(NetworkPromiseWire.encodeError(cause));
    }

    /** {@code serialize}: {@code tcp://host:port/key}, the store and the key. */
    public final String serialize() {
        return SCHEME + store.host() + ":" + store.port() + "/" + key;
    }

    /** {@code type}: always NETWORK. */
    public final TensorPromiseType type() {
        return TensorPromiseType.NETWORK;
    }
}
