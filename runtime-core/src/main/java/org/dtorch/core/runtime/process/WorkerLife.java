package org.dtorch.core.runtime.process;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * The life of one worker process as the controller sees it: a child of this JVM ({@link LocalWorkerLife}, known through
 * the JVM's process reaper) or a process on another node ({@link RemoteWorkerLife}, known through its node agent's
 * reports and its node's control connection).
 *
 * <p>Thread-safe: every implementation.
 */
interface WorkerLife {

    /** The process id (on its own host). */
    long pid();

    /** Whether the process still runs, as far as this JVM knows. */
    boolean isAlive();

    /** The exit status, or -1 while the process runs. */
    int exitStatusNow();

    /** Completes with the exit status once the process exited (or is known lost). */
    CompletableFuture<Integer> onExit();

    /** Kills the process (SIGKILL), or asks its node agent to; no-op once it exited. */
    void destroy();

    /** Waits up to {@code timeout} for the exit; true if it exited. */
    default boolean waitFor(Duration timeout) throws InterruptedException {
        try {
            onExit().get(Math.max(0, timeout.toMillis()), java.util.concurrent.TimeUnit.MILLISECONDS);
            return true;
        } catch (java.util.concurrent.TimeoutException e) {
            return false;
        } catch (java.util.concurrent.ExecutionException e) {
            return true;
        }
    }

    /** Why the process is gone when its whole node was lost (no exit status), or null. */
    default WorkerDiedException lost() {
        return null;
    }

    /** The last lines the process printed, for error messages (those of a remote one as its node agent last sent them). */
    String outputTail();
}
