package org.dtorch.core.shm;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.communication.CommPaths;

/**
 * Removes what runtime instances whose process died left behind: shared-memory files named
 * {@code dtorch-p<pid>-...} and rendezvous directories named {@code p<pid>-...}
 * ({@link org.dtorch.core.communication.GlobalCommInstanceId} puts the controller's pid first in every
 * instance id). A runtime calls it when it starts.
 *
 * <p>Only names whose pid is no longer a running process are touched, so runtimes that are alive are safe.
 * If the operating system has reused a dead instance's pid, its files wait for a later run.
 *
 * <p>Thread-safe: stateless; concurrent janitors at worst both try to delete a file.
 */
public final class ShmJanitor {
    private static final System.Logger LOG = System.getLogger(ShmJanitor.class.getName());
    private static final String SHM_PREFIX = SharedRegion.PREFIX + "p";

    private ShmJanitor() {
    }

    /** Removes stale files and directories; the names removed. */
    public static List<String> removeStale() {
        List<String> removed = new ArrayList<>();
        sweep(SharedRegion.directory(), SHM_PREFIX, removed);
        sweep(CommPaths.root(), "p", removed);
        if (!removed.isEmpty()) {
            LOG.log(System.Logger.Level.INFO, "removed " + removed.size() + " files left by dead runtime instances: " + removed);
        }
        return removed;
    }

    private static void sweep(Path dir, String prefix, List<String> removed) {
        if (!Files.isDirectory(dir)) {
            return;
        }
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir, prefix + "*")) {
            for (Path entry : entries) {
                String name = entry.getFileName().toString();
                int pid = ownerPid(name, prefix);
                if (pid > 0 && !Processes.isAlive(pid)) {
                    try {
                        if (Files.isDirectory(entry)) {
                            CommPaths.deleteRecursively(entry);
                        } else {
                            Files.deleteIfExists(entry);
                        }
                        removed.add(name);
                    } catch (IOException | RuntimeException e) {
                        LOG.log(System.Logger.Level.WARNING, "cannot remove stale " + entry + ": " + e);
                    }
                }
            }
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot list " + dir + " for stale files: " + e);
        }
    }

    /** The pid in {@code <prefix><digits>-...}, or -1. */
    static int ownerPid(String name, String prefix) {
        int end = name.indexOf('-', prefix.length());
        if (end <= prefix.length()) {
            return -1;
        }
        try {
            return Integer.parseInt(name.substring(prefix.length(), end));
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
