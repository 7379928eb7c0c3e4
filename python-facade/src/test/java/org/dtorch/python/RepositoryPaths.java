package org.dtorch.python;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Files of the repository, found from the working directory whether the tests run under Maven (the module's
 * directory) or from the repository root (tools/gpu-session.sh runs the gpu tests there, without Maven).
 *
 * <p>Thread-safe: stateless.
 */
final class RepositoryPaths {
    private RepositoryPaths() {
    }

    /** {@code relative} (such as {@code examples/python/quickstart.py}) under the repository root. */
    static Path resolve(String relative) {
        Path here = Path.of("").toAbsolutePath();
        Path root = Files.isDirectory(here.resolve("python-facade")) ? here : here.getParent();
        return root.resolve(relative);
    }
}
