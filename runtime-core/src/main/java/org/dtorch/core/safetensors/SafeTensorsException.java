package org.dtorch.core.safetensors;

import java.nio.file.Path;

/**
 * A safetensors file (or index, or request against one) that cannot be used: the message starts with the file and,
 * where one tensor is at fault, names it. Raised before any tensor data is mapped or any operator is issued.
 *
 * <p>Thread-safe: immutable.
 */
public final class SafeTensorsException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    private final transient Path file;

    /** A problem with {@code file} as a whole. */
    public SafeTensorsException(Path file, String message) {
        super(file + ": " + message);
        this.file = file;
    }

    /** A problem with {@code tensor} in {@code file}. */
    public SafeTensorsException(Path file, String tensor, String message) {
        super(file + ": tensor '" + tensor + "': " + message);
        this.file = file;
    }

    /** A problem with {@code file} as a whole, caused by {@code cause}. */
    public SafeTensorsException(Path file, String message, Throwable cause) {
        super(file + ": " + message, cause);
        this.file = file;
    }

    /** The file at fault. */
    public Path file() {
        return file;
    }
}
