package org.dtorch.core.shm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.dtorch.core.memory.ProcessMemory;

/**
 * A named region of shared memory: a file under {@link #directory()} (readable and writable by its owner
 * only) mapped into this process. Other processes open the same name and see the same bytes. Unlinking
 * removes the name; every mapping stays valid until it is unmapped.
 *
 * <p>The directory is shared with other users ({@code /dev/shm}), who may plant a file or a symbolic link at
 * a name the runtime is about to use. So the directory is checked once per process
 * ({@link OwnedPaths#checkSharedDirectory}), {@link #create} never follows a link and never takes over an
 * existing file ({@code O_CREAT | O_EXCL | O_NOFOLLOW}), and {@link #open} refuses a link
 * ({@code O_NOFOLLOW}) and anything that {@code fstat} on the open descriptor shows is not a regular file of
 * this user with mode 0600 ({@link UnsafePathException}), before mapping it.
 *
 * <p>Reference counted, because a mapping may be in use by several holders (a store instance and the
 * tensors that view its bytes, for instance): the opener holds one reference, {@link #retain()} adds one,
 * {@link #release()} drops one, and the last release unmaps. {@link #close()} drops the opener's
 * reference once. Touching {@link #segment()} after the last release crashes the process, so every user
 * holds a reference while it touches the bytes.
 *
 * <p>Thread-safe: reference counting is synchronized; access to the bytes follows the caller's protocol.
 */
public final class SharedRegion implements AutoCloseable {
    /** System property naming the directory of shared-memory files; default {@code /dev/shm}. */
    public static final String DIR_PROPERTY = "dtorch.shm.dir";
    /** Every file this runtime creates starts with this. */
    public static final String PREFIX = "dtorch-";

    private static final int OWNER_READ_WRITE = 0600;
    /** The last directory that passed the checks; checked again only if the property changes. */
    private static volatile Path checkedDirectory;

    private final String name;
    private final long address;
    private final MemorySegment segment;
    private int references = 1;
    private boolean openerReleased;
    private volatile boolean unlinkWhenUnmapped;

    private SharedRegion(String name, long address, long size) {
        this.name = name;
        this.address = address;
        this.segment = MemorySegment.ofAddress(address).reinterpret(size);
        ProcessMemory.SHARED_REGIONS.add(size);
    }

    /** The directory of shared-memory files. */
    public static Path directory() {
        return Path.of(System.getProperty(DIR_PROPERTY, "/dev/shm"));
    }

    /** The path of region {@code name}. */
    public static Path pathOf(String name) {
        return directory().resolve(name);
    }

    /**
     * The directory of shared-memory files, checked: created owner-only if missing, else owned by this user
     * or root and, if others may write in it, sticky.
     *
     * @throws UnsafePathException if others could remove or replace this user's files there
     */
    public static Path checkedDirectory() {
        Path dir = directory();
        if (!dir.equals(checkedDirectory)) {
            if (!Files.exists(dir)) {
                OwnedPaths.ensurePrivateDirectory(dir, "shared-memory directory", "set -D" + DIR_PROPERTY + " to a directory of your own");
            }
            OwnedPaths.checkSharedDirectory(dir, "shared-memory directory",
                "Set -D" + DIR_PROPERTY + " to a directory of your own (mode 0700).");
            checkedDirectory = dir;
        }
        return dir;
    }

    /**
     * Creates a new region of {@code size} bytes, zero-filled, owner-only. The pages are allocated when
     * first touched.
     *
     * @return empty if something (a region, any file, a link) has that name already
     * @throws UnsafePathException if the directory is not safe ({@link #checkedDirectory()})
     */
    public static Optional<SharedRegion> create(String name, long size) {
        checkName(name);
        if (size <= 0) {
            throw new IllegalArgumentException("shared memory '" + name + "': size must be positive, got " + size);
        }
        String path = checkedDirectory().resolve(name).toString();
        int fd;
        try {
            fd = Libc.open(path, Libc.O_RDWR | Libc.O_CREAT | Libc.O_EXCL | Libc.O_NOFOLLOW, OWNER_READ_WRITE);
        } catch (Libc.NativeCallException e) {
            if (e.errno == Libc.EEXIST) {
                return Optional.empty();
            }
            throw new UncheckedIOException(new IOException("cannot create shared memory " + path, e));
        }
        try {
            Libc.ftruncate(fd, size, path);
            return Optional.of(new SharedRegion(name, Libc.mmapShared(fd, size, path), size));
        } catch (RuntimeException e) {
            unlink(name);
            throw new UncheckedIOException(new IOException("cannot size or map shared memory " + path + " (" + size + " bytes)", e));
        } finally {
            Libc.close(fd);
        }
    }

    /**
     * Opens an existing region, all of it.
     *
     * @return empty if there is no region of that name, or if it is still empty (being created)
     * @throws UnsafePathException if the name is a symbolic link, or not a regular file of this user with mode
     *                             0600, or if the directory is not safe ({@link #checkedDirectory()})
     */
    public static Optional<SharedRegion> open(String name) {
        checkName(name);
        String path = checkedDirectory().resolve(name).toString();
        int fd;
        try {
            fd = Libc.open(path, Libc.O_RDWR | Libc.O_NOFOLLOW, 0);
        } catch (Libc.NativeCallException e) {
            if (e.errno == Libc.ENOENT) {
                return Optional.empty();
            }
            if (e.errno == Libc.ELOOP) {
                throw new UnsafePathException(Path.of(path), "shared memory " + path + " is a symbolic link; refusing to follow it: "
                    + "the runtime never makes one, so another user may have planted it");
            }
            throw new UncheckedIOException(new IOException("cannot open shared memory " + path, e));
        }
        try {
            Libc.FileStatus status = Libc.fstat(fd, path);
            OwnedPaths.checkRegion(path, status);
            long size = status.size();
            if (size == 0) {
                return Optional.empty();
            }
            return Optional.of(new SharedRegion(name, Libc.mmapShared(fd, size, path), size));
        } finally {
            Libc.close(fd);
        }
    }

    private static void checkName(String name) {
        if (name == null || name.isEmpty() || name.contains("/") || name.length() > 240) {
            throw new IllegalArgumentException("shared memory name must be a file name of at most 240 characters, got "
                + (name == null ? "null" : "'" + name + "'"));
        }
    }

    /** The mapped bytes; valid while the caller holds a reference. */
    public MemorySegment segment() {
        return segment;
    }

    /** The address of the first byte; valid while the caller holds a reference. */
    public long address() {
        return address;
    }

    /** The region's name (its file name). */
    public String name() {
        return name;
    }

    /** The size in bytes. */
    public long size() {
        return segment.byteSize();
    }

    /** Adds a reference; false if the region was already unmapped. */
    public synchronized boolean retain() {
        if (references == 0) {
            return false;
        }
        references++;
        return true;
    }

    /** Drops a reference; the last one unmaps. */
    public void release() {
        boolean unmap;
        synchronized (this) {
            if (references == 0) {
                throw new IllegalStateException("shared memory '" + name + "' released more often than retained");
            }
            unmap = --references == 0;
        }
        if (unmap) {
            Libc.munmap(address, segment.byteSize(), name);
            ProcessMemory.SHARED_REGIONS.subtract(segment.byteSize());
            if (unlinkWhenUnmapped) {
                unlink();
            }
        }
    }

    /**
     * Removes the name too when the last reference here goes: for a region that lives exactly as long as
     * a tensor of this process (other processes keep their own mappings).
     */
    public void unlinkWhenUnmapped() {
        this.unlinkWhenUnmapped = true;
    }

    /** True while some holder keeps the mapping. */
    public synchronized boolean isMapped() {
        return references > 0;
    }

    /** Removes the name; this and other mappings stay valid. Missing is fine. */
    public void unlink() {
        unlink(name);
    }

    /** Removes region {@code name}; missing is fine. */
    public static void unlink(String name) {
        try {
            Files.deleteIfExists(pathOf(name));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove shared memory " + name, e);
        }
    }

    /** Removes every region whose name starts with {@code prefix} (one runtime's or one store's). */
    public static void unlinkAll(String prefix) {
        checkName(prefix);
        try (java.nio.file.DirectoryStream<Path> files = Files.newDirectoryStream(directory(), prefix + "*")) {
            for (Path file : files) {
                Files.deleteIfExists(file);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove the shared memory named " + prefix + "*", e);
        }
    }

    /** True if region {@code name} exists. */
    public static boolean exists(String name) {
        return Files.exists(pathOf(name));
    }

    /** Drops the opener's reference. Idempotent. */
    @Override
    public void close() {
        synchronized (this) {
            if (openerReleased) {
                return;
            }
            openerReleased = true;
        }
        release();
    }

    @Override
    public String toString() {
        return "SharedRegion(" + name + ", " + segment.byteSize() + " bytes)";
    }
}
