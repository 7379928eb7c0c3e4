package org.dtorch.core.communication;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Where rendezvous files live: one root directory per user (property {@value #DIR_PROPERTY}, default
 * {@code <java.io.tmpdir>/dtorch-comm}), one sub-directory per runtime instance
 * ({@link GlobalCommInstanceId}), readable by the owner only.
 *
 * <p>Thread-safe: stateless.
 */
public final class CommPaths {
    /** System property naming the root directory of rendezvous files. */
    public static final String DIR_PROPERTY = "dtorch.comm.dir";

    private CommPaths() {
    }

    /** The root directory (not created). */
    public static Path root() {
        String configured = System.getProperty(DIR_PROPERTY);
        return configured != null && !configured.isBlank()
            ? Path.of(configured)
            : Path.of(System.getProperty("java.io.tmpdir"), "dtorch-comm");
    }

    /**
     * The file for a namespaced name such as {@code p12-ab3-1/cpu-0_1}: each {@code /}-separated segment
     * becomes a directory level, sanitized. Parent directories are created owner-only.
     */
    public static Path file(String namespacedName, String suffix) {
        Path path = root();
        String[] segments = namespacedName.split("/");
        for (String segment : segments) {
            if (!segment.isEmpty()) {
                path = path.resolve(GlobalCommInstanceId.sanitize(segment));
            }
        }
        createOwnerOnlyDirectories(path.getParent());
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

    private static void createOwnerOnlyDirectories(Path dir) {
        try {
            if (dir.getParent() != null && !Files.isDirectory(dir.getParent())) {
                createOwnerOnlyDirectories(dir.getParent());
            }
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (FileAlreadyExistsException exists) {
            // Another rank made it first.
        } catch (UnsupportedOperationException notPosix) {
            try {
                Files.createDirectories(dir);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot create " + dir, e);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + dir, e);
        }
    }
}
