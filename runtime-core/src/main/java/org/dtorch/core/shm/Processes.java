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
     * True if a process with id {@code pid} exists and has not exited (a zombie that nobody reaped yet counts
     * as gone). A pid may be reused by an unrelated process after its owner died; callers treat "alive" as
     * "maybe alive". Costs a {@code kill(pid, 0)} and, for a live pid, a read of {@code /proc/<pid>/stat}.
     */
    public static boolean isAlive(int pid) {
        if (pid <= 0) {
            return false;
        }
        if (pid == PID) {
            return true;
        }
        int probe = Libc.probeProcess(pid);
        if (probe == Libc.ESRCH) {
            return false;
        }
        return !isZombie(pid);
    }

    private static boolean isZombie(int pid) {
        try {
            String stat = java.nio.file.Files.readString(java.nio.file.Path.of("/proc", Integer.toString(pid), "stat"));
            int end = stat.lastIndexOf(')');
            char state = end >= 0 && end + 2 < stat.length() ? stat.charAt(end + 2) : '?';
            return state == 'Z' || state == 'X';
        } catch (java.io.IOException e) {
            return true; // gone between the probe and the read
        }
    }
}
