package org.dtorch.ops;

import org.junit.jupiter.api.Tag;

/** {@link RuntimeBehaviourTest} with every device a worker process. */
@Tag("multiprocess")
class RuntimeBehaviourInProcessesTest extends RuntimeBehaviourTest {

    @Override
    boolean processes() {
        return true;
    }
}
