package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;

/**
 * {@link InPlaceWritesTest} with every device a worker process: the in-place operators, box writes and implicit moves
 * cross the control channel by name, and views share the workers' device tensors as they share the threads'.
 */
@Tag("multiprocess")
@Timeout(300)
class InPlaceWritesInProcessesTest extends InPlaceWritesTest {

    /**
     * A runtime of four worker processes instead of the fixture's threads, which close first: JUnit runs the fixture's
     * {@code startRuntime} even under a method of the same name here, and a runtime replaced unclosed would leave its
     * device threads to every later test of this JVM.
     */
    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }
}
