package org.dtorch.ops;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@link RuntimeBehaviourTest} with every device a worker process. */
@Tag("multiprocess")
class RuntimeBehaviourInProcessesTest extends RuntimeBehaviourTest {

    @Override
    boolean processes() {
        return true;
    }

    /**
     * Tagged {@code slow} here: every build compares worker processes with threads bit for bit
     * ({@link ProcessModeSmokeTest}) and the same-device simulation with Gloo in threads.
     */
    @Override
    @Test
    @Tag("slow")
    void shouldGiveIdenticalResultsWithTheSameDeviceSimulation() {
        super.shouldGiveIdenticalResultsWithTheSameDeviceSimulation();
    }

    /** Tagged {@code slow} here: every build frees dropped handles in worker processes ({@link DroppedHandlesMemoryInProcessesTest}). */
    @Override
    @Test
    @Tag("slow")
    void shouldFreeForgottenHandlesThroughTheCleaner() {
        super.shouldFreeForgottenHandlesThroughTheCleaner();
    }

    /** Tagged {@code slow} here: every build returns worker processes' memory to its baseline ({@link DroppedHandlesMemoryInProcessesTest}). */
    @Override
    @Test
    @Tag("slow")
    void shouldReturnLiveBlobsAndNativeMemoryToTheirBaseline() {
        super.shouldReturnLiveBlobsAndNativeMemoryToTheirBaseline();
    }

    /** Tagged {@code slow} here: every build closes worker processes with operators in flight ({@link ShutdownInProcessesTest}). */
    @Override
    @Test
    @Tag("slow")
    void shouldShutDownCleanlyWithOperatorsInFlight() {
        super.shouldShutDownCleanlyWithOperatorsInFlight();
    }
}
