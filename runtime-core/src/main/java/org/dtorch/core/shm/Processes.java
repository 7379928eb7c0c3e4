package org.dtorch.core.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Process ids, to tell whether a peer recorded in shared memory is still alive, and process start times, to
 * tell whether the process that now has a pid is the one that recorded it.
 *
 * <p>A start time is the {@code starttime} field of {@code /proc/<pid>/stat}: clock ticks since boot, fixed
 * for the life of a process. A pid and its start time name one process for as long as the host runs.
 *
 * <p>Thread-safe: stateless.
 */
public final class Processes {
    private static final int PID = Math.toIntExact(ProcessHandle.current().pid());
    private static final long START_TICKS = startTicks(PID);
    /** {@code starttime} is field 22 of {@code /proc/<pid>/stat}; fields are counted from 1, the state (3) is the first after the name. */
    private static final int START_FIELD_AFTER_NAME = 22 - 3;

    private Processes() {
    }

    /** This process's id. */
    public static int currentPid() {
        return PID;
    }

    /** This process's start time in clock ticks since boot, or -1 if {@code /proc} cannot tell. */
    public static long currentStartTicks() {
        return START_TICKS;
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
        String stat = readStat(pid);
        return stat != null && !isZombie(stat); // null: gone between the probe and the read
    }

    /**
     * True only if the process that had {@code pid} and started at {@code startTicks} has verifiably exited:
     * no process has that pid, or it is a zombie, or the process that has it now started at another time
     * (the pid was reused). A {@code startTicks} below zero is unknown: then only a pid that no process has
     * counts. Whatever cannot be read counts as alive, so a caller that deletes on {@code true} never deletes
     * what a live process uses.
     */
    public static boolean hasExited(int pid, long startTicks) {
        if (pid <= 0) {
            return false;
        }
        if (pid == PID) {
            return startTicks >= 0 && START_TICKS >= 0 && startTicks != START_TICKS;
        }
        if (Libc.probeProcess(pid) == Libc.ESRCH) {
            return true;
        }
        String stat = readStat(pid);
        if (stat == null) {
            return false; // it may have exited meanwhile; a later look will tell
        }
        if (isZombie(stat)) {
            return true;
        }
        long now = startTicks(stat);
        return startTicks >= 0 && now >= 0 && now != startTicks;
    }

    private static long startTicks(int pid) {
        String stat = readStat(pid);
        return stat == null ? -1 : startTicks(stat);
    }

    private static long startTicks(String stat) {
        String[] fields = afterName(stat).split(" ");
        try {
            return fields.length > START_FIELD_AFTER_NAME ? Long.parseLong(fields[START_FIELD_AFTER_NAME]) : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private static boolean isZombie(String stat) {
        String fields = afterName(stat);
        char state = fields.isEmpty() ? '?' : fields.charAt(0);
        return state == 'Z' || state == 'X';
    }

    /** The fields after the process name, which is in parentheses and may itself hold spaces and parentheses. */
    private static String afterName(String stat) {
        int end = stat.lastIndexOf(')');
        return end >= 0 && end + 2 <= stat.length() ? stat.substring(end + 2).strip() : "";
    }

    private static String readStat(int pid) {
        try {
            return Files.readString(Path.of("/proc", Integer.toString(pid), "stat"));
        } catch (IOException e) {
            return null;
        }
    }
}
