package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The fixture of the operator test classes: one runtime of four CPU devices in threads, started before a class's first
 * test and closed after its last. Test classes run one after another (no parallel execution is configured), so the one
 * static field serves each in turn. A class in worker processes sets the field to {@link SharedWorkerProcesses}'
 * runtime, which outlives the class.
 */
abstract class FourDeviceRuntime {
    static DTorch dt;

    @BeforeAll
    static void startRuntime() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).build());
    }

    @AfterAll
    static void stopRuntime() {
        SharedWorkerProcesses.closeUnlessShared(dt);
    }
}
