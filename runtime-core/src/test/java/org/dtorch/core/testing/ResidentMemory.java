package org.dtorch.core.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.core.runtime.EagerRuntime;

/**
 * The memory a runtime holds, from {@code /proc}: the resident size of this JVM and of its worker processes,
 * plus the shared-memory files they map (each counted once, at its mapped size, whether or not its pages were
 * touched by a mapper: a file's pages stay in memory while anything maps it, even after it was unlinked).
 */
public record ResidentMemory(long residentBytes, long workerResidentBytes, long largestWorkerBytes, long sharedMappedBytes) {
    /** The bound on any one process of the runtime, and on the whole of a runtime in threads. */
    public static final long PROCESS_BOUND = 2L << 30;
    /** The bound on the whole of a runtime of two worker processes: three JVMs, each with its own fixed footprint. */
    public static final long PROCESSES_BOUND = 3L << 30;

    /** The memory {@code runtime} holds now: this JVM, its worker processes and their shared-memory files. */
    public static ResidentMemory of(EagerRuntime runtime) {
        List<Long> pids = new ArrayList<>(runtime.workerPids().values());
        long self = ProcessHandle.current().pid();
        long workers = 0;
        long largest = 0;
        for (long pid : pids) {
            long rss = rss(pid);
            workers += rss;
            largest = Math.max(largest, rss);
        }
        pids.add(self);
        Map<String, Long> shared = new HashMap<>();
        for (long pid : pids) {
            sharedMappings(pid, shared);
        }
        return new ResidentMemory(rss(self), workers, largest, shared.values().stream().mapToLong(Long::longValue).sum());
    }

    /** Every byte counted: this JVM, the workers and the shared-memory files. */
    public long total() {
        return residentBytes + workerResidentBytes + sharedMappedBytes;
    }

    /** True when every process, and the whole, stay within their bounds. */
    public boolean withinBounds() {
        boolean threads = workerResidentBytes == 0;
        return residentBytes < PROCESS_BOUND && largestWorkerBytes < PROCESS_BOUND
            && total() < (threads ? PROCESS_BOUND : PROCESSES_BOUND);
    }

    @Override
    public String toString() {
        return "%d MiB (this JVM %d MiB, workers %d MiB, the largest %d MiB, shared memory mapped %d MiB)".formatted(total() >> 20,
            residentBytes >> 20, workerResidentBytes >> 20, largestWorkerBytes >> 20, sharedMappedBytes >> 20);
    }

    private static long rss(long pid) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", String.valueOf(pid), "status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("\\D", "")) * 1024;
                }
            }
            throw new AssertionError("no VmRSS in /proc/" + pid + "/status");
        } catch (IOException e) {
            throw new AssertionError("cannot read /proc/" + pid + "/status", e);
        }
    }

    /** Mappings of files under /dev/shm, by device and inode, with the largest mapped size seen. */
    private static void sharedMappings(long pid, Map<String, Long> out) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", String.valueOf(pid), "maps"))) {
                String[] f = line.trim().split("\\s+", 6);
                if (f.length < 6 || !f[5].startsWith("/dev/shm/")) {
                    continue;
                }
                String[] range = f[0].split("-");
                long size = Long.parseUnsignedLong(range[1], 16) - Long.parseUnsignedLong(range[0], 16);
                out.merge(f[3] + ":" + f[4], size, Math::max);
            }
        } catch (IOException e) {
            throw new AssertionError("cannot read /proc/" + pid + "/maps", e);
        }
    }
}
