package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.OnThread;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link ThreadGroupManager#abort}: how a closing runtime frees ranks that wait for peers that will never come,
 * in a Gloo collective (which no interrupt reaches) or while a group is being created. The deadline is 60 s; the
 * waits end in far less.
 */
@Timeout(60)
class ThreadGroupAbortTest {
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    @Test
    void shouldFreeARankBlockedInAGlooCollectiveWhosePeerNeverComes() throws Exception {
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, DEADLINE)) {
            List<ThreadGroup> groups = RankThreads.run(2, rank -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank));
            OnThread<Throwable> blocked = OnThread.start("gloo-rank-0", () -> {
                try (Tensor x = TestTensors.full(1f, 4)) {
                    groups.get(0).allReduce(x).close();
                    return null;
                } catch (Throwable e) {
                    return e;
                }
            });
            Await.asleep(blocked.thread()); // rank 0 is inside Gloo, waiting for rank 1, which never calls
            int busy = manager.abort("the test aborts");
            assertEquals(1, busy, "rank 0's instance is in its collective and is left to it; rank 1's is released");
            // Freed by the abort, not by the 60 s deadline: the message says so, and the wait for it ends well before.
            Throwable failure = blocked.result().get(30, TimeUnit.SECONDS);
            assertInstanceOf(CommException.class, failure);
            assertTrue(failure.getMessage().contains("the group was being aborted: the test aborts"), failure.getMessage());
            assertEquals(FailureKind.COMMUNICATION, FailureKind.of(failure), "Gloo's own error, recorded where it was caught");
            assertEquals(0, manager.abort("the test aborts"), "once its collective failed, rank 0's instance is released too");
            try (Tensor x = TestTensors.full(1f, 4)) {
                CommException refused = org.junit.jupiter.api.Assertions.assertThrows(CommException.class, () -> groups.get(1).allReduce(x));
                assertTrue(refused.getMessage().contains("the group was aborted: the test aborts"), refused.getMessage());
            }
        }
    }

    @Test
    void shouldFreeARankWaitingForAGroupToForm() throws Exception {
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, DEADLINE)) {
            OnThread<Throwable> waiting = OnThread.start("forming-rank-0", () -> {
                try {
                    manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(3), 0);
                    return null;
                } catch (Throwable e) {
                    return e;
                }
            });
            Await.asleep(waiting.thread()); // rank 0 waits for ranks 1 and 2, which never come
            manager.abort("the runtime is closing");
            // Woken by the abort, not by the 60 s deadline: the message says so, and the wait for it ends well before.
            Throwable failure = waiting.result().get(30, TimeUnit.SECONDS);
            assertInstanceOf(CommException.class, failure);
            assertTrue(failure.getMessage().contains("was aborted while waiting for ranks [1, 2]: the runtime is closing"), failure.getMessage());
            CommException refused = org.junit.jupiter.api.Assertions.assertThrows(CommException.class,
                () -> manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), 0));
            assertTrue(refused.getMessage().contains("was aborted (the runtime is closing)"), refused.getMessage());
        }
    }
}
