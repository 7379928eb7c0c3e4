package org.dtorch.python;

import java.nio.file.Path;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;

/**
 * Where a run of the launcher gets its Python host, and the directory the user ran it from (where its script and
 * trace paths are relative to). A direct start builds a host in this process's working directory; the runtime server
 * ({@link RunServer}) hands over a context it prepared before the run, in the client's directory.
 *
 * <p>Not thread-safe: one run uses it, on its own thread.
 */
interface ScriptHosts {
    /** The direct start: a new host for each run, in this process's working directory. */
    ScriptHosts DIRECT = new ScriptHosts() {
        @Override
        public Path workingDirectory() {
            return Path.of("").toAbsolutePath();
        }

        @Override
        public PythonHost open(PyBridge bridge, Path isolatedDirectory) {
            PythonHost.Builder host = PythonHost.builder().bridge(bridge);
            if (isolatedDirectory != null) {
                host.isolatedIn(isolatedDirectory);
            }
            return host.build();
        }
    };

    /** The absolute directory relative paths of the command line are taken from. */
    Path workingDirectory();

    /**
     * A host whose scripts reach {@code bridge}; isolated in {@code isolatedDirectory} ({@code --isolated}), or with the
     * user's rights where that is null. The caller closes it.
     */
    PythonHost open(PyBridge bridge, Path isolatedDirectory);
}
