package org.dtorch.core.shm;

/**
 * Process ids, to tell whether a peer recorded in shared memory is still alive.
 *
 * <p>Thread-safe: stateless.
 */
public final class Processes {
    private static final int PID = Math.toIntExact(ProcessHandle.current().pid());

    private Processes() {
    }

    /** This process's id. */
    public static int currentPid() {
        return PID;
    }

    /**
     * True if a process with id {@code pid} exists (a zombie that nobody reaped counts as gone). A pid
     * may be reused by an unrelated process after its owner died; callers treat "alive" as "maybe alive".
     */
    public static boolean isAlive(int pid) {
        if (pid <= 0) {
            return false;
        }
        if (pid == PID) {
            return true;
        }
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    }
}
