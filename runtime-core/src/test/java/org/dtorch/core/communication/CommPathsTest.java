package org.dtorch.core.communication;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.dtorch.core.runtime.process.JvmCommand;
import org.dtorch.core.shm.UnsafePathException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The rendezvous root on a host shared with other users: per user by default, created owner-only, and an
 * existing one refused unless it is a real directory of this user that nobody else can open. The tests
 * run as root, which bypasses permission checks but not these.
 */
@Timeout(120)
class CommPathsTest {
    private static final int OTHER_UID = 65534;

    private final String previous = System.getProperty(CommPaths.DIR_PROPERTY);

    @AfterEach
    void restoreProperty() {
        if (previous == null) {
            System.clearProperty(CommPaths.DIR_PROPERTY);
        } else {
            System.setProperty(CommPaths.DIR_PROPERTY, previous);
        }
    }

    @Test
    void shouldCreateTheRootAndItsDirectoriesOwnerOnly(@TempDir Path parent) throws Exception {
        Path root = parent.resolve("a/b/root");
        System.setProperty(CommPaths.DIR_PROPERTY, root.toString());
        Path file = CommPaths.file("p1-x-1/cpu-0_1", ".filestore");
        assertEquals(root.resolve("p1-x-1/cpu-0_1.filestore"), file);
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(root)));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(root.resolve("p1-x-1"))));
        assertThrows(IllegalArgumentException.class, () -> CommPaths.file("p1-x-1/../../escape", ".filestore"));
    }

    @Test
    void shouldRefuseARootOwnedByAnotherUser(@TempDir Path parent) throws Exception {
        Path root = planted(parent, "rwx------", dir -> setUid(dir, OTHER_UID));
        UnsafePathException e = assertThrows(UnsafePathException.class, () -> CommPaths.file("p1-x-1/cpu-0_1", ".filestore"));
        assertTrue(e.getMessage().contains(root.toString()) && e.getMessage().contains("owned by uid " + OTHER_UID)
            && e.getMessage().contains(CommPaths.DIR_PROPERTY), e.getMessage());
        assertFalse(Files.exists(root.resolve("p1-x-1")), "nothing is created in a refused root");
    }

    @Test
    void shouldRefuseARootThatGroupOrOthersCanOpen(@TempDir Path parent) throws Exception {
        Path root = planted(parent, "rwxr-x---", dir -> { });
        UnsafePathException e = assertThrows(UnsafePathException.class, CommPaths::checkedRoot);
        assertTrue(e.getMessage().contains("mode 0750"), e.getMessage());
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString("rwx------"));
        assertEquals(root, CommPaths.checkedRoot(), "the same directory, owner-only, is used");
    }

    @Test
    void shouldRefuseASymbolicLinkAsRoot(@TempDir Path parent) throws Exception {
        Path target = Files.createDirectory(parent.resolve("target"), PosixFilePermissions.asFileAttribute(
            PosixFilePermissions.fromString("rwx------")));
        Path root = Files.createSymbolicLink(parent.resolve("root"), target);
        System.setProperty(CommPaths.DIR_PROPERTY, root.toString());
        UnsafePathException e = assertThrows(UnsafePathException.class, () -> CommPaths.file("p1-x-1/g", ".filestore"));
        assertTrue(e.getMessage().contains("symbolic link"), e.getMessage());
        try (var entries = Files.list(target)) {
            assertEquals(0, entries.count(), "nothing is created through the link");
        }
    }

    @Test
    void shouldDefaultToAPrivateDirectoryPerUser(@TempDir Path parent) throws Exception {
        int uid = (Integer) Files.getAttribute(Files.createFile(parent.resolve("probe")), "unix:uid");
        Path tmp = Files.createDirectory(parent.resolve("tmp"));
        Path xdg = Files.createDirectory(parent.resolve("xdg"), PosixFilePermissions.asFileAttribute(
            PosixFilePermissions.fromString("rwx------")));

        assertEquals(tmp.resolve("dtorch-" + uid).toString(), rootSeenByChild(tmp, null), "without XDG_RUNTIME_DIR");
        assertEquals(xdg.resolve("dtorch").toString(), rootSeenByChild(tmp, xdg), "in the user's XDG_RUNTIME_DIR");
        setUid(xdg, OTHER_UID);
        assertEquals(tmp.resolve("dtorch-" + uid).toString(), rootSeenByChild(tmp, xdg), "an XDG_RUNTIME_DIR of another user is ignored");
    }

    /** {@link CommPaths#root()} as a new process sees it, with this {@code java.io.tmpdir} and this {@code XDG_RUNTIME_DIR} or none. */
    private static String rootSeenByChild(Path tmpdir, Path xdg) throws Exception {
        Map<String, String> properties = Map.of("java.io.tmpdir", tmpdir.toString(), CommPaths.DIR_PROPERTY, "");
        ProcessBuilder builder = JvmCommand.of(PrintRoot.class.getName(), List.of(), properties, List.of()).processBuilder()
            .redirectErrorStream(true);
        builder.environment().remove(CommPaths.XDG_RUNTIME_DIR);
        if (xdg != null) {
            builder.environment().put(CommPaths.XDG_RUNTIME_DIR, xdg.toString());
        }
        Process child = builder.start();
        try {
            assertTrue(child.waitFor(60, TimeUnit.SECONDS), "the child did not exit within 60 s");
            String output = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            assertEquals(0, child.exitValue(), output);
            return output.lines().filter(l -> l.startsWith("ROOT ")).findFirst().orElseThrow(() -> new AssertionError(output))
                .substring("ROOT ".length());
        } finally {
            child.destroyForcibly();
        }
    }

    /** Prints {@link CommPaths#root()}. */
    static final class PrintRoot {
        public static void main(String[] args) {
            System.out.println("ROOT " + CommPaths.root());
        }
    }

    private Path planted(Path parent, String permissions, Consumer<Path> tamper) throws Exception {
        Path root = Files.createDirectory(parent.resolve("root"));
        Files.setPosixFilePermissions(root, PosixFilePermissions.fromString(permissions));
        tamper.accept(root);
        System.setProperty(CommPaths.DIR_PROPERTY, root.toString());
        return root;
    }

    private static void setUid(Path path, int uid) {
        try {
            Files.setAttribute(path, "unix:uid", uid);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
