package org.dtorch.core.device;

/**
 * Work on a device did not finish within a host wait's deadline. The message names the device, the stream or
 * event, what the caller waited for and how long, for example
 * {@code sync of cuda:0 stream 3: the stream's work did not finish within 300 s}.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class DeviceTimeoutException extends RuntimeException {

    /** A timeout with its full message. */
    public DeviceTimeoutException(String message) {
        super(message);
    }
}
