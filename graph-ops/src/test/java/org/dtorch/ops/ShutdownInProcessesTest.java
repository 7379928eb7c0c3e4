package org.dtorch.ops;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link ShutdownTest} with every device a worker process: a worker that does not stop in time is killed. Whatever a
 * worker is blocked in, close ends it the same way, by that kill: every build closes on the worker that nothing else
 * stops (a kernel that ignores interrupts), and the {@code slow} run on the other blockers too (each of which every
 * build closes on in threads, where they differ). Two workers: one holds up the other, and close kills what does not
 * stop among two processes as among four, so each test starts two worker JVMs, not four.
 */
@Tag("multiprocess")
class ShutdownInProcessesTest extends ShutdownTest {

    @Override
    boolean processes() {
        return true;
    }

    @Override
    int devices() {
        return 2;
    }

    @Override
    @ParameterizedTest
    @EnumSource(names = "KERNEL_IGNORING_INTERRUPTS")
    void shouldCloseWithinFiveSecondsWhateverTheDevicesAreBlockedIn(Blocker blocker) throws Exception {
        super.shouldCloseWithinFiveSecondsWhateverTheDevicesAreBlockedIn(blocker);
    }

    @ParameterizedTest
    @EnumSource(names = "KERNEL_IGNORING_INTERRUPTS", mode = EnumSource.Mode.EXCLUDE)
    @Tag("slow")
    void shouldCloseWithinFiveSecondsWhateverElseTheDevicesAreBlockedIn(Blocker blocker) throws Exception {
        super.shouldCloseWithinFiveSecondsWhateverTheDevicesAreBlockedIn(blocker);
    }
}
