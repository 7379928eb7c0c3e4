package org.dtorch.core.shm;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.GlobalCommInstanceId;

/**
 * Removes what runtime instances whose process died left behind: shared-memory files (and the control
 * socket's directory) named {@code dtorch-p<pid>.<start>-...} and rendezvous directories named
 * {@code p<pid>.<start>-...} ({@link GlobalCommInstanceId} puts the controller's pid and start time first in
 * every instance id). A runtime calls it when it starts.
 *
 * <p>An entry is removed only if this user owns the entry itself (a symbolic link is never followed nor
 * removed) and its creator has verifiably exited ({@link Processes#hasExited}): no process has the pid, or
 * the process that has it started at another time. A name without a start time (older runtimes) is removed
 * only once no process has its pid. Whatever cannot be read stays, so live runtimes, and other users' files
 * when this runs as root, are safe.
 *
 * <p>Both directories are checked first ({@link SharedRegion#checkedDirectory()},
 * {@link CommPaths#checkedRoot()}): a runtime refuses to start in unsafe ones.
 *
 * <p>Thread-safe: stateless; concurrent janitors at worst both try to delete a file.
 */
public final class ShmJanitor {
    private static final System.Logger LOG = System.getLogger(ShmJanitor.class.getName());

    private ShmJanitor() {
    }

    /**
     * Removes stale files and directories; the names removed.
     *
     * @throws UnsafePathException if the shared-memory directory or the rendezvous root is not safe to use
     */
    public static List<String> removeStale() {
        Path shm = SharedRegion.checkedDirectory();
        Path rendezvous = CommPaths.checkedRoot();
        List<String> removed = new ArrayList<>();
        sweep(shm, SharedRegion.PREFIX, removed);
        sweep(rendezvous, "", removed);
        if (!removed.isEmpty()) {
            LOG.log(System.Logger.Level.INFO, "removed " + removed.size() + " files left by dead runtime instances: " + removed);
        }
        return removed;
    }

    private static void sweep(Path dir, String prefix, List<String> removed) {
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir, prefix + "p*")) {
            for (Path entry : entries) {
                String name = entry.getFileName().toString();
                Optional<GlobalCommInstanceId.Creator> creator = GlobalCommInstanceId.creatorOf(name, prefix);
                if (creator.isEmpty() || !Processes.hasExited(creator.get().pid(), creator.get().startTicks())) {
                    continue;
                }
                try {
                    if (!OwnedPaths.isOwnedEntry(entry)) {
                        continue;
                    }
                    // Another runtime's janitor may sweep the same entry at the same time: a file it deleted first
                    // is not reported here; a directory is reported once it is gone, whoever emptied it.
                    boolean deleted;
                    if (Files.isDirectory(entry, LinkOption.NOFOLLOW_LINKS)) {
                        CommPaths.deleteRecursively(entry);
                        deleted = !Files.exists(entry, LinkOption.NOFOLLOW_LINKS);
                    } else {
                        deleted = Files.deleteIfExists(entry);
                    }
                    if (deleted) {
                        removed.add(name);
                    }
                } catch (IOException | RuntimeException e) {
                    LOG.log(System.Logger.Level.WARNING, "cannot remove stale " + entry + ": " + e);
                }
            }
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot list " + dir + " for stale files: " + e);
        }
    }
}
