package org.dtorch.core.runtime;

import org.dtorch.core.device.Device;
import org.dtorch.core.graph.Operator;

/**
 * An operator's kernel threw on a device, or could not run because an input had failed. Every future that
 * depends on its outputs completes with this error (as the cause), naming the operator and the device.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class OperatorFailedException extends RuntimeException {

    OperatorFailedException(String message, Throwable cause) {
        super(message, cause);
    }

    /** The kernel of {@code op} threw {@code cause} on {@code device}. */
    static OperatorFailedException kernelFailed(Operator op, Device device, Throwable cause) {
        return new OperatorFailedException("operator " + op.label() + " failed on " + device + ": " + cause, cause);
    }
}
