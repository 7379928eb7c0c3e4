package org.dtorch.ops;

import org.dtorch.api.DTorch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link RuntimeBehaviourTest} with every device a worker process. The tests that only issue operators run on
 * {@link SharedWorkerProcesses}' runtime; those that close theirs, count what it holds or compare modes start their own.
 */
@Tag("multiprocess")
class RuntimeBehaviourInProcessesTest extends RuntimeBehaviourTest {

    @Override
    boolean processes() {
        return true;
    }

    @Override
    DTorch startForOperators() {
        return SharedWorkerProcesses.runtime();
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
