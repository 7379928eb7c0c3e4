package org.dtorch.python;

import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Path;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;

/**
 * A GraalPy context the runtime server makes before a run arrives: a new engine, Python initialized, and the modules
 * every run imports (the launcher's {@code runpy}, {@code torch}, {@code dtorch}) imported, with no runtime and no
 * script yet. {@link #adopt} gives it to one run: the client's working directory, and the run's bridge. A context
 * serves one run and is closed with it, so nothing of one script is visible to the next; only contexts with the user's
 * rights are prepared ({@code --isolated} runs get a new isolated context).
 *
 * <p>Not thread-safe: the server's preparing thread makes it, then one run's thread adopts and closes it.
 */
final class PreparedPython {
    /** What the preparation imports: what the launcher's runner and nearly every script import first. */
    static final String WARM_UP = "import os, runpy, sys, traceback\nimport torch\nimport dtorch\n";
    private final PythonHost host;

    private PreparedPython(PythonHost host) {
        this.host = host;
    }

    /** A new context whose streams are {@code out}, {@code err} and {@code in}, with the warm-up imports done. */
    static PreparedPython prepare(OutputStream out, OutputStream err, InputStream in) {
        PythonHost host = PythonHost.builder().out(out).err(err).in(in).build();
        try {
            host.eval(WARM_UP);
            return new PreparedPython(host);
        } catch (RuntimeException | Error e) {
            host.close();
            throw e;
        }
    }

    /**
     * Gives the context to a run: Python's working directory becomes {@code cwd} (the client's), and the run's bridge is
     * published. The environment stays what a new context has (the launcher's contexts do not pass the process's
     * environment to Python). The caller closes the returned host.
     */
    PythonHost adopt(Path cwd, PyBridge bridge) {
        host.eval("globals()").putHashEntry("_dtorch_cwd", cwd.toString());
        host.eval("os.chdir(_dtorch_cwd)\ndel _dtorch_cwd");
        host.publishBridge(bridge);
        return host;
    }

    /** Closes an unused context (the server stops). */
    void close() {
        host.close();
    }
}
