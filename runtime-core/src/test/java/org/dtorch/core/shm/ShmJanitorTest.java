package org.dtorch.core.shm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.dtorch.core.communication.CommPaths;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The janitor removes only what is this user's and whose creator has verifiably exited: a pid now held by
 * another process (another start time) counts as exited, a live creator's files stay, and so do other
 * users' files and symbolic links even though root could remove them.
 */
@Timeout(60)
class ShmJanitorTest {
    private static final int OTHER_UID = 65534;

    @Test
    void shouldRemoveWhatACreatorLeftOnceItsPidBelongsToAnotherProcess() throws Exception {
        Process sleeper = new ProcessBuilder("sleep", "60").start();
        int pid = Math.toIntExact(sleeper.pid());
        long start = startTicks(pid);
        int self = Math.toIntExact(ProcessHandle.current().pid());
        String reused = "p" + pid + "." + Long.toString(start + 1, 36) + "-zz999-1";
        String live = "p" + pid + "." + Long.toString(start, 36) + "-zz999-1";
        String earlierSelf = "p" + self + "." + Long.toString(startTicks(self) - 1, 36) + "-zz999-1";
        String currentSelf = "p" + self + "." + Long.toString(startTicks(self), 36) + "-zz999-1";
        List<String> names = List.of(reused, live, earlierSelf, currentSelf);
        try {
            for (String instance : names) {
                SharedRegion.create(SharedRegion.PREFIX + instance + "-st-0", 4096).orElseThrow().close();
                Files.writeString(CommPaths.file(instance + "/cpu-0_1", ".filestore"), "x");
            }
            // A runtime starting in another test JVM sweeps the same directories at any moment, so which janitor removes
            // a stale entry depends on who lists it first: what holds either way is that stale entries are gone, live
            // ones stay, and no janitor's list names a live one.
            List<String> removed = ShmJanitor.removeStale();
            for (String gone : List.of(reused, earlierSelf)) {
                assertFalse(SharedRegion.exists(SharedRegion.PREFIX + gone + "-st-0"), gone + " (this sweep removed " + removed + ")");
                assertFalse(Files.exists(CommPaths.root().resolve(gone)));
            }
            for (String kept : List.of(live, currentSelf)) {
                assertFalse(removed.contains(kept) || removed.contains(SharedRegion.PREFIX + kept + "-st-0"), kept + " in " + removed);
                assertTrue(SharedRegion.exists(SharedRegion.PREFIX + kept + "-st-0"), "a live creator's region must stay: " + kept);
                assertTrue(Files.exists(CommPaths.root().resolve(kept)), "a live creator's directory must stay: " + kept);
            }
        } finally {
            sleeper.destroyForcibly();
            for (String instance : names) {
                SharedRegion.unlink(SharedRegion.PREFIX + instance + "-st-0");
                CommPaths.deleteRecursively(CommPaths.root().resolve(instance));
            }
        }
    }

    @Test
    void shouldLeaveOtherUsersFilesAndSymbolicLinksAlone(@TempDir Path elsewhere) throws Exception {
        int dead = deadPid();
        String foreign = SharedRegion.PREFIX + "p" + dead + "-zz999-1-st-0";
        String link = SharedRegion.PREFIX + "p" + dead + "-zz999-2-st-0";
        String mine = SharedRegion.PREFIX + "p" + dead + "-zz999-3-st-0";
        Path target = elsewhere.resolve("target");
        Files.write(target, new byte[] {1, 2, 3});
        SharedRegion.create(foreign, 4096).orElseThrow().close();
        SharedRegion.create(mine, 4096).orElseThrow().close();
        Files.setAttribute(SharedRegion.pathOf(foreign), "unix:uid", OTHER_UID);
        Files.createSymbolicLink(SharedRegion.pathOf(link), target);
        try {
            List<String> removed = ShmJanitor.removeStale();
            // A runtime starting in the other test JVM sweeps too and may delete the stale file first: what matters is
            // that it is gone, not which sweep deleted it.
            assertFalse(SharedRegion.exists(mine), mine + " (this sweep removed " + removed + ")");
            assertFalse(removed.contains(foreign) || removed.contains(link), removed.toString());
            assertTrue(Files.exists(SharedRegion.pathOf(foreign)), "another user's file must stay");
            assertTrue(Files.isSymbolicLink(SharedRegion.pathOf(link)), "a symbolic link must stay");
            assertArrayEquals(new byte[] {1, 2, 3}, Files.readAllBytes(target));
        } finally {
            Files.deleteIfExists(SharedRegion.pathOf(foreign));
            Files.deleteIfExists(SharedRegion.pathOf(link));
            SharedRegion.unlink(mine);
        }
    }

    @Test
    void shouldRefuseToSweepARootOthersCanOpen(@TempDir Path parent) throws Exception {
        Path root = Files.createDirectory(parent.resolve("root"));
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path stale = Files.createDirectory(root.resolve("p" + deadPid() + "-zz999-1"));
        String previous = System.getProperty(CommPaths.DIR_PROPERTY);
        System.setProperty(CommPaths.DIR_PROPERTY, root.toString());
        try {
            UnsafePathException e = assertThrows(UnsafePathException.class, ShmJanitor::removeStale);
            assertEquals(root, e.path());
            assertTrue(Files.exists(stale, LinkOption.NOFOLLOW_LINKS), "nothing is removed from a root that is refused");
        } finally {
            if (previous == null) {
                System.clearProperty(CommPaths.DIR_PROPERTY);
            } else {
                System.setProperty(CommPaths.DIR_PROPERTY, previous);
            }
        }
    }

    /** A pid that no process has now: that of a child that exited and was reaped. */
    private static int deadPid() throws Exception {
        Process shortLived = new ProcessBuilder("true").start();
        shortLived.waitFor();
        return Math.toIntExact(shortLived.pid());
    }

    /** Field 22 of {@code /proc/<pid>/stat}, read here independently of the code under test. */
    private static long startTicks(int pid) throws IOException {
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        String[] afterName = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(afterName[22 - 3]);
    }
}
