package org.dtorch.ops;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link ClientCloseSchedulesTest} with every device a worker process: the closed runtime's worker JVMs end, and the
 * client gets its values or an error saying that the runtime was closed.
 */
@Tag("multiprocess")
class ClientCloseSchedulesInProcessesTest extends ClientCloseSchedulesTest {

    @Override
    boolean processes() {
        return true;
    }

    /**
     * Slow only: each schedule starts four worker JVMs. Every build runs the random schedules in threads
     * ({@link ClientCloseSchedulesTest}) and, here, the two close races in worker processes.
     */
    @Override
    @Test
    @Tag("slow")
    void shouldEndTheClientWithTheValuesOrAClosedErrorAndLeaveNothingBehind() throws Exception {
        runSchedules(8_000_000, 1);
    }

    @Override
    @Test
    @Tag("slow")
    void shouldSurviveAHundredClientCloseSchedules() throws Exception {
        runSchedules(80_000_000, 100);
    }
}
