package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

/**
 * {@link ChannelEdgeTest} with every device a worker process: the redistribution and the detach operators carry the
 * channel's options to the workers by their codecs, and each worker attaches its end by them.
 */
@Tag("multiprocess")
class ChannelEdgeInProcessesTest extends ChannelEdgeTest {

    @BeforeAll
    static void startProcesses() {
        dt.close();
        dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).build());
    }
}
