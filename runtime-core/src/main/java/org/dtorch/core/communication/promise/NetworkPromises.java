package org.dtorch.core.communication.promise;

import java.time.Duration;

/**
 * Network promises: a promise whose future may live on another host, its outcome kept under a key
 * of a c10d {@code TCPStore}. {@link TensorPromises#create} with {@link TensorPromiseType#NETWORK} hosts a store server
 * for the promise in this process; {@link #create(String, int, Duration)} and {@link #createVoid(String, int, Duration)}
 * use a store served elsewhere (a multi-node runtime's own), which the creator and the completer reach at the same
 * address.
 *
 * <p>Thread-safe: stateless.
 */
public final class NetworkPromises {
    /** The host name a hosted store is advertised by in {@code serialize()}. */
    public static final String ADVERTISED_HOST_PROPERTY = "dtorch.network.promiseHost";
    /** Its default: loopback, which only other processes of this host reach. */
    public static final String DEFAULT_ADVERTISED_HOST = "127.0.0.1";

    private NetworkPromises() {
    }

    /**
     * A tensor promise whose outcome goes to the {@code TCPStore} at {@code storeHost:storePort}; {@code getTimeout}
     * is its future's deadline (null: the global timeout at the time of the call). Nothing is connected until it is
     * completed or awaited.
     */
    public static TensorPromise create(String storeHost, int storePort, Duration getTimeout) {
        return new NetworkTensorPromise(NetworkPromiseStore.shared(storeHost, storePort), NetworkPromise.newKey(), true, getTimeout);
    }

    /** A void promise on the {@code TCPStore} at {@code storeHost:storePort}; see {@link #create(String, int, Duration)}. */
    public static VoidPromise createVoid(String storeHost, int storePort, Duration getTimeout) {
        return new NetworkVoidPromise(NetworkPromiseStore.shared(storeHost, storePort), NetworkPromise.newKey(), true, getTimeout);
    }

    /** A tensor promise with a store server of its own, advertised as {@value #ADVERTISED_HOST_PROPERTY}. */
    static TensorPromise hosted(Duration getTimeout) {
        return new NetworkTensorPromise(NetworkPromiseStore.host(advertisedHost()), NetworkPromise.newKey(), true, getTimeout);
    }

    /** A void promise with a store server of its own. */
    static VoidPromise hostedVoid(Duration getTimeout) {
        return new NetworkVoidPromise(NetworkPromiseStore.host(advertisedHost()), NetworkPromise.newKey(), true, getTimeout);
    }

    /** Rebuilds, to complete it, a tensor promise serialized elsewhere. */
    static TensorPromise tensorFromSerialized(String data) {
        NetworkPromise.Address a = NetworkPromise.parse(data);
        return new NetworkTensorPromise(NetworkPromiseStore.shared(a.host(), a.port()), a.key(), false, null);
    }

    /** Rebuilds, to complete it, a void promise serialized elsewhere. */
    static VoidPromise voidFromSerialized(String data) {
        NetworkPromise.Address a = NetworkPromise.parse(data);
        return new NetworkVoidPromise(NetworkPromiseStore.shared(a.host(), a.port()), a.key(), false, null);
    }

    private static String advertisedHost() {
        return System.getProperty(ADVERTISED_HOST_PROPERTY, DEFAULT_ADVERTISED_HOST);
    }
}
