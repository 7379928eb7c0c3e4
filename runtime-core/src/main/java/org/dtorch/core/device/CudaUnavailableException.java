package org.dtorch.core.device;

/**
 * CUDA work was asked for where it cannot run: the CPU build, a missing CUDA library, no driver, no such
 * device. The message names what is missing and the fix. Thrown before any work is issued, so nothing
 * needs cleaning up.
 */
public final class CudaUnavailableException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    /** An exception with the given message. */
    public CudaUnavailableException(String message) {
        super(message);
    }
}
