package org.dtorch.ops;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.dtorch.api.DTorch;

/** Memory mappings and open file descriptors of a runtime's worker processes, from {@code /proc}; zero in thread mode. */
record WorkerResources(long mappings, long descriptors) {

    static WorkerResources of(DTorch dt) {
        long maps = 0;
        long fds = 0;
        for (long pid : dt.runtime().workerPids().values()) {
            try (Stream<String> lines = Files.lines(Path.of("/proc", String.valueOf(pid), "maps"));
                 Stream<Path> open = Files.list(Path.of("/proc", String.valueOf(pid), "fd"))) {
                maps += lines.count();
                fds += open.count();
            } catch (IOException e) {
                throw new AssertionError("cannot read /proc of worker " + pid, e);
            }
        }
        return new WorkerResources(maps, fds);
    }
}
