package org.dtorch.ops;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/** {@link RingAttentionSpecTest} with every device a worker process: the spec crosses by its codec, the ring runs there. */
@Tag("multiprocess")
class RingAttentionSpecInProcessesTest extends RingAttentionSpecTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = SharedWorkerProcesses.runtime();
    }
}
