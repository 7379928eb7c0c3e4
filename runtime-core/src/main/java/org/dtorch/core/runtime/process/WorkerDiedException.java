package org.dtorch.core.runtime.process;

import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.device.Device;

/**
 * The worker process of a device exited while the runtime was running: every future still pending fails
 * with this error, which names the device, the process and its exit status, and the runtime refuses new
 * operators.
 *
 * Its kind is {@link FailureKind#WORKER_DIED}.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public class WorkerDiedException extends CommException {
    private final Device device;
    private final int exitStatus;

    WorkerDiedException(Device device, long pid, int exitStatus, String detail) {
        super(FailureKind.WORKER_DIED, "the worker process of " + device + " (pid " + pid + ") exited with status " + exitStatus + describe(exitStatus)
            + (detail == null || detail.isBlank() ? "" : ": " + detail), null);
        this.device = device;
        this.exitStatus = exitStatus;
    }

    /** A death told in {@code message} (a node lost as a whole); the exit status is unknown (-1). */
    WorkerDiedException(Device device, String message) {
        super(FailureKind.WORKER_DIED, message, null);
        this.device = device;
        this.exitStatus = -1;
    }

    /** The device whose worker died. */
    public Device device() {
        return device;
    }

    /** Its exit status (128 + n for signal n, as the JVM reports it); -1 when its node was lost with it. */
    public int exitStatus() {
        return exitStatus;
    }

    static String describe(int status) {
        return switch (status) {
            case 137 -> " (killed by SIGKILL)";
            case 143 -> " (killed by SIGTERM)";
            case 134 -> " (aborted, SIGABRT)";
            case 139 -> " (crashed, SIGSEGV)";
            case 130 -> " (interrupted, SIGINT)";
            default -> status > 128 && status < 160 ? " (killed by signal " + (status - 128) + ")" : "";
        };
    }
}
