package org.dtorch.core.shm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Set;

/**
 * The runtime's rules for the files and directories it makes on a host shared with other users, in one
 * place:
 *
 * <ul>
 *   <li>a <b>private directory</b> (the rendezvous root, the control socket's directory) is created with mode
 *       0700; one that exists already must be a real directory (not a symbolic link), owned by this user
 *       ({@code geteuid}), with no group or other permission bits;</li>
 *   <li>a <b>shared directory</b> (the shared-memory directory, {@code /dev/shm}) must be owned by this user
 *       or by root, and if group or others may write in it, it must be sticky, so that nobody else can
 *       remove or rename this user's files there;</li>
 *   <li>a <b>region</b> opened there must be a regular file owned by this user, readable and writable by its
 *       owner only; it is opened with {@code O_NOFOLLOW} and checked through {@code fstat} on the open
 *       descriptor, so a link or a file planted at its name is refused before a byte is mapped.</li>
 * </ul>
 *
 * <p>Root bypasses permission checks, not these: they are the runtime's own.
 *
 * <p>Thread-safe: stateless.
 */
public final class OwnedPaths {
    private static final int UID = Libc.geteuid();
    private static final int ROOT = 0;
    private static final int GROUP_OR_OTHER = 077;
    private static final int GROUP_OR_OTHER_WRITE = 022;
    private static final int STICKY = 01000;
    private static final int TYPE = 0170000;
    private static final int DIRECTORY = 0040000;
    private static final int REGULAR_FILE = 0100000;
    private static final int SYMBOLIC_LINK = 0120000;
    private static final FileAttribute<Set<PosixFilePermission>> OWNER_ONLY =
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"));

    private OwnedPaths() {
    }

    /** The effective user id of this process: the owner of every file it creates. */
    public static int currentUid() {
        return UID;
    }

    /**
     * Creates {@code dir} with mode 0700 if it is missing (its missing parents with the default mode), else
     * checks that it is a private directory of this user.
     *
     * @param role   what the directory is for, for the message ("rendezvous root")
     * @param remedy what the user can do instead, for the message ("set -Ddtorch.comm.dir=...")
     * @return {@code dir}
     * @throws UnsafePathException if it exists and is not private to this user
     */
    public static Path ensurePrivateDirectory(Path dir, String role, String remedy) {
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            try {
                Path parent = dir.toAbsolutePath().getParent();
                if (parent != null) {
                    Files.createDirectories(parent);
                }
                Files.createDirectory(dir, OWNER_ONLY);
            } catch (FileAlreadyExistsException raced) {
                // made meanwhile, by another rank or another user: the check below tells which
            } catch (IOException e) {
                throw new UncheckedIOException("cannot create the " + role + " " + dir, e);
            }
        }
        checkPrivateDirectory(dir, role, remedy);
        return dir;
    }

    /**
     * Creates {@code dir} with mode 0700; it must not exist (nobody else may have prepared it).
     *
     * @throws UnsafePathException if something exists at that path already
     */
    public static Path createPrivateDirectory(Path dir, String role) {
        try {
            Files.createDirectory(dir, OWNER_ONLY);
            return dir;
        } catch (FileAlreadyExistsException e) {
            throw new UnsafePathException(dir, "the " + role + " " + dir + " exists already, and the runtime only uses one it "
                + "created itself: another process or user made it");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create the " + role + " " + dir, e);
        }
    }

    /**
     * Checks that {@code dir} is a directory, not a symbolic link, owned by this user, with mode 0700 or less.
     *
     * @throws UnsafePathException if it is not
     */
    public static void checkPrivateDirectory(Path dir, String role, String remedy) {
        String problem = privateDirectoryProblem(attributesOf(dir, LinkOption.NOFOLLOW_LINKS, role));
        if (problem != null) {
            throw new UnsafePathException(dir, "the " + role + " " + dir + " " + problem + "; refusing to use it, since other users "
                + "could read or replace what the runtime puts there. Remove it, or " + remedy);
        }
    }

    /** True if {@code dir} exists and passes {@link #checkPrivateDirectory}. */
    public static boolean isPrivateDirectory(Path dir) {
        try {
            return privateDirectoryProblem(Files.readAttributes(dir, "unix:uid,mode", LinkOption.NOFOLLOW_LINKS)) == null;
        } catch (IOException e) {
            return false;
        }
    }

    private static String privateDirectoryProblem(Map<String, Object> attributes) {
        int mode = (Integer) attributes.get("mode");
        int uid = (Integer) attributes.get("uid");
        if ((mode & TYPE) == SYMBOLIC_LINK) {
            return "is a symbolic link";
        } else if ((mode & TYPE) != DIRECTORY) {
            return "is not a directory";
        } else if (uid != UID) {
            return "is owned by uid " + uid + ", not by this user (uid " + UID + ")";
        } else if ((mode & GROUP_OR_OTHER) != 0) {
            return "has mode " + octal(mode) + ": group or others have access to it (it must be 0700)";
        }
        return null;
    }

    /**
     * Checks that {@code file} (a symbolic link to it is followed, as for a mounted secret) is a regular file owned by
     * this user with no group or other permission bits: a secret nobody else can read or replace.
     *
     * @throws UnsafePathException if it is not
     */
    public static void checkPrivateFile(Path file, String role, String remedy) {
        Map<String, Object> attributes = attributesOf(file, null, role);
        int mode = (Integer) attributes.get("mode");
        int uid = (Integer) attributes.get("uid");
        String problem = null;
        if ((mode & TYPE) != REGULAR_FILE) {
            problem = "is not a regular file";
        } else if (uid != UID) {
            problem = "is owned by uid " + uid + ", not by this user (uid " + UID + ")";
        } else if ((mode & GROUP_OR_OTHER) != 0) {
            problem = "has mode " + octal(mode) + ": group or others have access to it (it must be 0600 or 0400)";
        }
        if (problem != null) {
            throw new UnsafePathException(file, "the " + role + " " + file + " " + problem + "; refusing to use it. " + remedy);
        }
    }

    /**
     * Checks that {@code dir} (a symbolic link to it is followed) is a directory owned by this user or root,
     * in which nobody else can remove or rename this user's files: not writable by group or others unless
     * sticky.
     *
     * @throws UnsafePathException if it is not
     */
    public static void checkSharedDirectory(Path dir, String role, String remedy) {
        Map<String, Object> attributes = attributesOf(dir, null, role);
        int mode = (Integer) attributes.get("mode");
        int uid = (Integer) attributes.get("uid");
        String problem = null;
        if ((mode & TYPE) != DIRECTORY) {
            problem = "is not a directory";
        } else if (uid != UID && uid != ROOT) {
            problem = "is owned by uid " + uid + ", neither this user (uid " + UID + ") nor root";
        } else if ((mode & GROUP_OR_OTHER_WRITE) != 0 && (mode & STICKY) == 0) {
            problem = "has mode " + octal(mode) + ": others may write in it and it is not sticky, so they could remove or "
                + "replace this user's files";
        }
        if (problem != null) {
            throw new UnsafePathException(dir, "the " + role + " " + dir + " " + problem + "; refusing to use it. " + remedy);
        }
    }

    /**
     * True if {@code entry} itself (not what a link points at) is owned by this user and is not a symbolic
     * link: what a cleaner may remove. False if it is gone.
     */
    public static boolean isOwnedEntry(Path entry) {
        try {
            Map<String, Object> attributes = Files.readAttributes(entry, "unix:uid,mode", LinkOption.NOFOLLOW_LINKS);
            return (Integer) attributes.get("uid") == UID && ((Integer) attributes.get("mode") & TYPE) != SYMBOLIC_LINK;
        } catch (NoSuchFileException gone) {
            return false;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the owner of " + entry, e);
        }
    }

    /**
     * Checks a shared-memory file opened as {@code path}: a regular file of this user, mode 0600 or less.
     *
     * @throws UnsafePathException if it is not
     */
    static void checkRegion(String path, Libc.FileStatus status) {
        String problem = null;
        if (!status.isRegularFile()) {
            problem = "is not a regular file";
        } else if (status.uid() != UID) {
            problem = "is owned by uid " + status.uid() + ", not by this user (uid " + UID + ")";
        } else if ((status.permissions() & GROUP_OR_OTHER) != 0) {
            problem = "has mode " + octal(status.permissions()) + ": group or others have access to it (the runtime creates 0600)";
        }
        if (problem != null) {
            throw new UnsafePathException(Path.of(path), "shared memory " + path + " " + problem
                + "; refusing to map it: another user may have planted it");
        }
    }

    private static Map<String, Object> attributesOf(Path path, LinkOption option, String role) {
        try {
            return option == null
                ? Files.readAttributes(path, "unix:uid,mode")
                : Files.readAttributes(path, "unix:uid,mode", option);
        } catch (NoSuchFileException e) {
            throw new UncheckedIOException("the " + role + " " + path + " does not exist", e);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the owner and mode of the " + role + " " + path, e);
        }
    }

    private static String octal(int mode) {
        return String.format("%04o", mode & 07777);
    }
}
