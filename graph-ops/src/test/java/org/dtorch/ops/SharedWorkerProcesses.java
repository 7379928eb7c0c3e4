package org.dtorch.ops;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;

/**
 * One runtime of four CPU devices, each a worker process, shared by the operator test classes that run in one test
 * JVM: starting four worker JVMs costs seconds of CPU, and these classes only issue operators, which leave a runtime
 * as usable as they found it. A class whose tests close their runtime, kill a worker or count what the runtime holds
 * starts its own. The shared runtime closes when the test JVM exits.
 *
 * <p>Test classes run one after another in a test JVM, so the runtime serves one class at a time. Thread-safe.
 */
final class SharedWorkerProcesses {
    private static DTorch shared;
    /** The threads that existed once the shared runtime had started: the runtime's own among them. */
    private static Set<Thread> threadsOfTheSharedRuntime = Set.of();

    private SharedWorkerProcesses() {
    }

    /** The shared runtime, started on first use. */
    static synchronized DTorch runtime() {
        if (shared == null) {
            shared = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).build());
            threadsOfTheSharedRuntime = Set.copyOf(Thread.getAllStackTraces().keySet());
            DTorch started = shared;
            Runtime.getRuntime().addShutdownHook(new Thread(started::close, "close the shared worker processes"));
        }
        return shared;
    }

    /** Closes {@code dt}, unless it is the shared runtime, which stays open for the next class. */
    static synchronized void closeUnlessShared(DTorch dt) {
        if (dt != null && dt != shared) {
            dt.close();
        }
    }

    /**
     * The live threads among {@code threads} that the shared runtime did not start, for a test that asserts every thread
     * of its own runtime is gone after close.
     */
    static synchronized List<Thread> notOfTheSharedRuntime(Set<Thread> threads) {
        Set<Thread> left = new HashSet<>(threads);
        left.removeAll(threadsOfTheSharedRuntime);
        return List.copyOf(left);
    }
}
