package org.dtorch.core.communication;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.stream.Stream;
import org.dtorch.core.shm.OwnedPaths;

/**
 * Where rendezvous files live: one root directory per user, private to it (mode 0700), and one
 * sub-directory per runtime instance ({@link GlobalCommInstanceId}).
 *
 * <p>The root is {@value #DIR_PROPERTY} if set, else {@code $XDG_RUNTIME_DIR/dtorch} if that variable names
 * a private directory of this user (as the XDG specification requires), else
 * {@code <java.io.tmpdir>/dtorch-<uid>}. It is created with mode 0700; one that exists already is used only if
 * it is a real directory owned by this user with no group or other access, else refused with an
 * {@link org.dtorch.core.shm.UnsafePathException}: in a shared {@code /tmp} another user could have created
 * it first, or planted a symbolic link there, to read or replace c10d's rendezvous files. Its parent is the
 * user's to choose; the runtime does not check it.
 *
 * <p>Thread-safe: stateless.
 */
public final class CommPaths {
    /** System property naming the root directory of rendezvous files. */
    public static final String DIR_PROPERTY = "dtorch.comm.dir";
    /** Environment variable naming the user's private runtime directory (XDG Base Directory specification). */
    public static final String XDG_RUNTIME_DIR = "XDG_RUNTIME_DIR";

    private static final String ROLE = "rendezvous root";
    private static final String REMEDY = "set -D" + DIR_PROPERTY + " to a directory of your own";

    private CommPaths() {
    }

    /** The root directory (neither created nor checked: see {@link #checkedRoot()}). */
    public static Path root() {
        String configured = System.getProperty(DIR_PROPERTY);
        if (configured != null && !configured.isBlank()) {
            return Path.of(configured);
        }
        String xdg = System.getenv(XDG_RUNTIME_DIR);
        if (xdg != null && !xdg.isBlank() && Path.of(xdg).isAbsolute() && OwnedPaths.isPrivateDirectory(Path.of(xdg))) {
            return Path.of(xdg, "dtorch");
        }
        return Path.of(System.getProperty("java.io.tmpdir"), "dtorch-" + OwnedPaths.currentUid());
    }

    /**
     * The root directory, created with mode 0700 if missing.
     *
     * @throws org.dtorch.core.shm.UnsafePathException if it exists and is a symbolic link, not a directory, owned
     *                                                 by another user, or open to group or others
     */
    public static Path checkedRoot() {
        return OwnedPaths.ensurePrivateDirectory(root(), ROLE, REMEDY);
    }

    /**
     * The file for a namespaced name such as {@code p12-ab3-1/cpu-0_1}: each {@code /}-separated segment
     * becomes a directory level, sanitized, under the {@linkplain #checkedRoot() checked root}. Parent
     * directories are created owner-only.
     */
    public static Path file(String namespacedName, String suffix) {
        Path root = checkedRoot();
        Path path = root;
        String[] segments = namespacedName.split("/");
        for (String segment : segments) {
            if (segment.equals(".") || segment.equals("..")) {
                throw new IllegalArgumentException("rendezvous name '" + namespacedName + "' leaves its directory ('" + segment + "')");
            }
            if (!segment.isEmpty()) {
                path = path.resolve(GlobalCommInstanceId.sanitize(segment));
            }
        }
        if (path.equals(root)) {
            throw new IllegalArgumentException("rendezvous name '" + namespacedName + "' has no file name");
        }
        createOwnerOnlyDirectories(root, path.getParent());
        return path.resolveSibling(path.getFileName() + suffix);
    }

    /** The SHA-256 of {@code s}'s UTF-8 bytes in hex: short, file-name-safe names for long keys. */
    public static String sha256Hex(String s) {
        try {
            return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256")
                .digest(s.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }

    /** Deletes a directory tree; missing is fine. */
    public static void deleteRecursively(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot delete " + p, e);
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException("cannot delete " + dir, e);
        }
    }

    /** Creates {@code dir} and its missing parents up to {@code root} (which exists), each with mode 0700. */
    private static void createOwnerOnlyDirectories(Path root, Path dir) {
        if (dir.equals(root)) {
            return;
        }
        createOwnerOnlyDirectories(root, dir.getParent());
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (FileAlreadyExistsException exists) {
            // Another rank made it first; nobody else can write inside the private root.
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + dir, e);
        }
    }
}
