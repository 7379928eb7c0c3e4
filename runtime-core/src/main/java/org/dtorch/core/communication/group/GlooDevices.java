package org.dtorch.core.communication.group;

import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.gloo.Device;

/**
 * The Gloo transport devices of this JVM, one per CPU device id, shared by every group that device's rank joins. Each
 * device runs one TCP event loop: with a single device for the JVM, the ranks' loops would be one thread that every
 * byte of every rank goes through. The devices live as long as the JVM.
 *
 * <p>Thread-safe: ranks may ask for their devices concurrently; each id gets one device.
 */
final class GlooDevices {
    /** System property: host name or address Gloo binds to; default the loopback address. */
    static final String HOSTNAME_PROPERTY = ThreadGroupManager.GLOO_HOSTNAME_PROPERTY;
    private static final String DEFAULT_HOSTNAME = "127.0.0.1";
    private static final ConcurrentHashMap<Long, Device> DEVICES = new ConcurrentHashMap<>();

    private GlooDevices() {
    }

    /** How many CPU devices of this JVM joined a Gloo group: at most that many ranks copy at once. */
    static int count() {
        return DEVICES.size();
    }

    /** The transport device of CPU device {@code deviceId}, made on first use on {@value #HOSTNAME_PROPERTY}. */
    static Device forCpuDevice(long deviceId) {
        return DEVICES.computeIfAbsent(deviceId,
            id -> ProcessGroupGloo.createDeviceForHostname(System.getProperty(HOSTNAME_PROPERTY, DEFAULT_HOSTNAME)));
    }
}
