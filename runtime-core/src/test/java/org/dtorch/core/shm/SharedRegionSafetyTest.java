package org.dtorch.core.shm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What another user of the host could plant in the shared-memory directory: a link at a region's name, a
 * file of their own, a file others can open, something that is not a file, or a directory in which they
 * can remove this user's files. Every case is refused before a byte is mapped. The tests run as root,
 * which bypasses permission checks but not these: they are the runtime's own.
 */
@Timeout(60)
class SharedRegionSafetyTest {
    /** An unprivileged uid that is not this user: "nobody". */
    private static final int OTHER_UID = 65534;

    private final String instance = ShmFiles.freshInstance("safe");

    private String name(String suffix) {
        return SharedRegion.PREFIX + instance + "-" + suffix;
    }

    @Test
    void shouldRefuseToFollowASymbolicLinkPlantedAtARegionName(@TempDir Path elsewhere) throws Exception {
        Path victim = elsewhere.resolve("victim");
        byte[] content = new byte[4096];
        content[0] = 42;
        Files.write(victim, content);
        Files.setPosixFilePermissions(victim, PosixFilePermissions.fromString("rw-------"));
        String name = name("link");
        Files.createSymbolicLink(SharedRegion.pathOf(name), victim);
        try {
            UnsafePathException e = assertThrows(UnsafePathException.class, () -> SharedRegion.open(name));
            assertTrue(e.getMessage().contains(SharedRegion.pathOf(name).toString()) && e.getMessage().contains("symbolic link"),
                e.getMessage());
            assertTrue(SharedRegion.create(name, 4096).isEmpty(), "create must not take over the link's name");
            assertArrayEquals(content, Files.readAllBytes(victim), "the link's target is untouched");
        } finally {
            SharedRegion.unlink(name);
        }
        assertTrue(Files.exists(victim), "unlinking removes the link, not its target");
    }

    @Test
    void shouldRefuseARegionOwnedByAnotherUser() throws Exception {
        String name = name("other");
        SharedRegion.create(name, 4096).orElseThrow().close();
        try {
            Files.setAttribute(SharedRegion.pathOf(name), "unix:uid", OTHER_UID);
            UnsafePathException e = assertThrows(UnsafePathException.class, () -> SharedRegion.open(name));
            assertTrue(e.getMessage().contains("owned by uid " + OTHER_UID) && e.getMessage().contains(name), e.getMessage());
        } finally {
            SharedRegion.unlink(name);
        }
    }

    @Test
    void shouldRefuseARegionThatOthersCanOpen() throws Exception {
        String name = name("open");
        SharedRegion.create(name, 4096).orElseThrow().close();
        try {
            Files.setPosixFilePermissions(SharedRegion.pathOf(name), PosixFilePermissions.fromString("rw-rw-rw-"));
            UnsafePathException e = assertThrows(UnsafePathException.class, () -> SharedRegion.open(name));
            assertTrue(e.getMessage().contains("mode 0666"), e.getMessage());
            Files.setPosixFilePermissions(SharedRegion.pathOf(name), PosixFilePermissions.fromString("rw-------"));
            try (SharedRegion region = SharedRegion.open(name).orElseThrow()) {
                assertEquals(4096, region.size(), "the same file, owner-only again, opens");
            }
        } finally {
            SharedRegion.unlink(name);
        }
    }

    @Test
    void shouldRefuseSomethingOtherThanARegularFile() throws Exception {
        String name = name("fifo");
        Process mkfifo = new ProcessBuilder("mkfifo", "-m", "600", SharedRegion.pathOf(name).toString()).inheritIO().start();
        assertTrue(mkfifo.waitFor(10, TimeUnit.SECONDS) && mkfifo.exitValue() == 0, "mkfifo failed");
        try {
            UnsafePathException e = assertThrows(UnsafePathException.class, () -> SharedRegion.open(name));
            assertTrue(e.getMessage().contains("not a regular file"), e.getMessage());
        } finally {
            SharedRegion.unlink(name);
        }
    }

    @Test
    void shouldRefuseADirectoryWhereOthersCanRemoveThisUsersFiles(@TempDir Path parent) throws Exception {
        Path dir = Files.createDirectory(parent.resolve("shm"));
        String previous = System.getProperty(SharedRegion.DIR_PROPERTY);
        System.setProperty(SharedRegion.DIR_PROPERTY, dir.toString());
        try {
            Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
            UnsafePathException open = assertThrows(UnsafePathException.class, () -> SharedRegion.create(name("d"), 4096));
            assertTrue(open.getMessage().contains(dir.toString()) && open.getMessage().contains("not sticky")
                && open.getMessage().contains(SharedRegion.DIR_PROPERTY), open.getMessage());

            Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
            Files.setAttribute(dir, "unix:uid", OTHER_UID);
            UnsafePathException foreign = assertThrows(UnsafePathException.class, () -> SharedRegion.open(name("d")));
            assertTrue(foreign.getMessage().contains("owned by uid " + OTHER_UID), foreign.getMessage());

            Files.setAttribute(dir, "unix:uid", OwnedPaths.currentUid());
            Files.setAttribute(dir, "unix:mode", 01777); // like /dev/shm: others write, the sticky bit protects
            SharedRegion.create(name("d"), 4096).orElseThrow().close();
            assertTrue(Files.exists(dir.resolve(name("d"))));
            SharedRegion.unlink(name("d"));
        } finally {
            restore(SharedRegion.DIR_PROPERTY, previous);
        }
        assertEquals(List.of(), ShmFiles.of(instance));
    }

    @Test
    void shouldCreateAMissingDirectoryOwnerOnly(@TempDir Path parent) throws Exception {
        Path dir = parent.resolve("made");
        String previous = System.getProperty(SharedRegion.DIR_PROPERTY);
        System.setProperty(SharedRegion.DIR_PROPERTY, dir.toString());
        try {
            SharedRegion.create(name("m"), 4096).orElseThrow().close();
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
            assertFalse(Files.isSymbolicLink(dir));
            SharedRegion.unlink(name("m"));
        } finally {
            restore(SharedRegion.DIR_PROPERTY, previous);
        }
    }

    private static void restore(String property, String previous) {
        if (previous == null) {
            System.clearProperty(property);
        } else {
            System.setProperty(property, previous);
        }
    }
}
