package org.dtorch.ops;

import org.junit.jupiter.api.Tag;

/** {@link MemoryStatsTest} with every device a worker process: the workers answer the queries and watch their syncs. */
@Tag("multiprocess")
class MemoryStatsInProcessesTest extends MemoryStatsTest {

    @Override
    boolean processes() {
        return true;
    }
}
