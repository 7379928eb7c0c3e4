package org.dtorch.core.runtime;

import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.TypedFailure;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceTimeoutException;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;

/**
 * An operator's kernel threw on a device, or could not run because an input had failed. Every future that
 * depends on its outputs completes with this error (as the cause), naming the operator and the device.
 * Its kind is the one the kernel's error carries (a collective inside the kernel broke: {@link FailureKind#COMMUNICATION})
 * or, when that error names none, {@link FailureKind#TIMEOUT} for a host wait for the device that passed its deadline
 * and {@link FailureKind#KERNEL} otherwise: the runner that caught it records it.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class OperatorFailedException extends RuntimeException implements TypedFailure {
    private final FailureKind kind;

    OperatorFailedException(FailureKind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = kind;
    }

    /** The kernel of {@code op} threw {@code cause} on {@code device}. */
    static OperatorFailedException kernelFailed(Operator op, Device device, Throwable cause) {
        FailureKind named = FailureKind.of(cause);
        if (named == FailureKind.UNKNOWN) {
            // The device layer sits below the failure kinds: its one timeout is named here.
            named = cause instanceof DeviceTimeoutException ? FailureKind.TIMEOUT : FailureKind.KERNEL;
        }
        return new OperatorFailedException(named, "operator " + op.label() + " failed on " + device + ": " + cause, cause);
    }

    /**
     * The background communication of {@code op}'s kernel (an issued all-reduce, {@link DeviceKernel#issue}) failed on
     * {@code device}, where {@code awaitedFor} waited for it.
     */
    static OperatorFailedException completionFailed(Operator op, Device device, String awaitedFor, Throwable cause) {
        FailureKind named = FailureKind.of(cause);
        return new OperatorFailedException(named == FailureKind.UNKNOWN ? FailureKind.KERNEL : named, "operator " + op.label()
            + " failed on " + device + ": its background communication, awaited for " + awaitedFor + ", failed: " + cause, cause);
    }

    @Override
    public FailureKind kind() {
        return kind;
    }
}
