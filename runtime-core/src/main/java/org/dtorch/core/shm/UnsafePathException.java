package org.dtorch.core.shm;

import java.nio.file.Path;

/**
 * A file or directory the runtime would use is not safe to use on a host shared with other users: a
 * symbolic link where the runtime never makes one, something owned by another user, or something other
 * users may read or change. Thrown before anything is read from or written to it; the message names the
 * path, what is wrong, and what to do.
 *
 * <p>Thread-safe: immutable once thrown.
 */
public final class UnsafePathException extends IllegalStateException {
    private final transient Path path;

    /** An exception about {@code path}; {@code message} says what is wrong and what to do. */
    public UnsafePathException(Path path, String message) {
        super(message);
        this.path = path;
    }

    /** The path refused. */
    public Path path() {
        return path;
    }
}
