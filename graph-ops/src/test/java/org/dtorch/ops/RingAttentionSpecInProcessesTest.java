package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/** {@link RingAttentionSpecTest} with every device a worker process: the spec crosses by its codec, the ring runs there. */
@Tag("multiprocess")
class RingAttentionSpecInProcessesTest extends RingAttentionSpecTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).build());
    }
}
