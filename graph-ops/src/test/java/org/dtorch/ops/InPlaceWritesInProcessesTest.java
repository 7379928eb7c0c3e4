package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
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

    /** Hides the thread-mode runtime of the fixture: a runtime of four worker processes instead. */
    @BeforeAll
    static void startRuntime() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).build());
    }
}
