package org.dtorch.core.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.shm.SharedRegion;

/** The shared-memory files of one test's instance id, to check that nothing is left behind. */
public final class ShmFiles {
    private static final AtomicInteger COUNTER = new AtomicInteger();

    private ShmFiles() {
    }

    /** An instance id no other test uses, that still names this process (so the janitor can clean it). */
    public static String freshInstance(String label) {
        return GlobalCommInstanceId.processPrefix() + "-" + label + COUNTER.incrementAndGet();
    }

    /** The names of the files of {@code instanceId}, sorted. */
    public static List<String> of(String instanceId) {
        String prefix = SharedRegion.PREFIX + instanceId + "-";
        try (Stream<Path> files = Files.list(SharedRegion.directory())) {
            return files.map(p -> p.getFileName().toString()).filter(n -> n.startsWith(prefix)).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
