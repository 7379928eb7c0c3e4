package org.dtorch.core.shm;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The few C library calls that shared memory needs, through the FFM API: {@code open}, {@code ftruncate},
 * {@code mmap}, {@code munmap}, {@code close}, {@code geteuid}, {@code kill} and {@code syscall} (for
 * {@code fstat} and futexes). Every call captures {@code errno}; a failure becomes a
 * {@link NativeCallException} naming the call, the path and the errno.
 *
 * <p>{@code mmap} is called directly rather than through {@code FileChannel.map}: unmapping a shared
 * arena makes every JVM thread take part in a handshake, which costs more than the whole store
 * operation it belongs to, and unmapping must happen at a known time (an unlinked region keeps its
 * memory until its last mapping goes).
 *
 * <p>Thread-safe: stateless.
 */
final class Libc {
    static final int O_RDWR = 0x2;
    static final int O_CREAT = 0x40;
    static final int O_EXCL = 0x80;
    static final int O_NOFOLLOW = 0x20000;
    static final int O_CLOEXEC = 0x80000;
    static final int PROT_READ = 0x1;
    static final int PROT_WRITE = 0x2;
    static final int MAP_SHARED = 0x1;
    static final int ENOENT = 2;
    static final int EAGAIN = 11;
    static final int ETIMEDOUT = 110;
    static final int EINTR = 4;
    static final int EEXIST = 17;
    static final int ESRCH = 3;
    static final int ELOOP = 40;
    static final long MAP_FAILED = -1L;

    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option ERRNO_OPTION = Linker.Option.captureCallState("errno");

    private static final MethodHandle OPEN = handle("open",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
        Linker.Option.firstVariadicArg(2), ERRNO_OPTION);
    private static final MethodHandle CLOSE = handle("close",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), ERRNO_OPTION);
    private static final MethodHandle FTRUNCATE = handle("ftruncate",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), ERRNO_OPTION);
    private static final MethodHandle GETEUID = handle("geteuid", FunctionDescriptor.of(ValueLayout.JAVA_INT));
    /*
     * fstat is a system call rather than glibc's fstat: glibc exports that symbol only since 2.33. The kernel's
     * struct stat on x86_64, of which only the marked fields are read:
     *
     *   offset  size  field
     *        0     8  st_dev
     *        8     8  st_ino
     *       16     8  st_nlink
     *       24     4  st_mode     <- type and permission bits
     *       28     4  st_uid      <- owner
     *       32     4  st_gid
     *       36     4  (padding)
     *       40     8  st_rdev
     *       48     8  st_size     <- bytes
     *       56    88  st_blksize, st_blocks, times, reserved
     *      144        (size)
     */
    private static final MethodHandle SYSCALL_FSTAT = handle("syscall",
        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS),
        Linker.Option.firstVariadicArg(1), ERRNO_OPTION);
    private static final long SYS_FSTAT = 5; // x86_64
    private static final long STAT_SIZE = 144;
    private static final long STAT_MODE = 24;
    private static final long STAT_UID = 28;
    private static final long STAT_BYTES = 48;
    private static final MethodHandle MMAP = handle("mmap",
        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT,
            ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), ERRNO_OPTION);
    private static final MethodHandle SYSCALL_FUTEX = handle("syscall",
        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
            ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT),
        Linker.Option.firstVariadicArg(1), ERRNO_OPTION);
    private static final StructLayout TIMESPEC = MemoryLayout.structLayout(ValueLayout.JAVA_LONG.withName("tv_sec"),
        ValueLayout.JAVA_LONG.withName("tv_nsec"));
    private static final long SYS_FUTEX = 202; // x86_64
    private static final MethodHandle KILL = handle("kill",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), ERRNO_OPTION);
    private static final MethodHandle MUNMAP = handle("munmap",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), ERRNO_OPTION);

    private Libc() {
    }

    private static MethodHandle handle(String name, FunctionDescriptor descriptor, Linker.Option... options) {
        MemorySegment symbol = LINKER.defaultLookup().find(name)
            .orElseThrow(() -> new UnsupportedOperationException("the C library has no '" + name + "'; shared memory needs Linux"));
        return LINKER.downcallHandle(symbol, descriptor, options);
    }

    /** A native call failed. */
    static final class NativeCallException extends RuntimeException {
        final int errno;

        NativeCallException(String call, String what, int errno) {
            super(call + "(" + what + ") failed: errno " + errno + " (" + describe(errno) + ")");
            this.errno = errno;
        }
    }

    static String describe(int errno) {
        return switch (errno) {
            case ENOENT -> "no such file";
            case EEXIST -> "file exists";
            case 13 -> "permission denied";
            case 12 -> "out of memory";
            case 24 -> "too many open files";
            case 28 -> "no space left on device";
            case 22 -> "invalid argument";
            case ELOOP -> "a symbolic link where none may be";
            default -> "see errno(3)";
        };
    }

    /** {@code open(path, flags, mode)}; the file descriptor. */
    static int open(String path, int flags, int mode) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int fd = (int) OPEN.invokeExact(state, arena.allocateFrom(path), flags | O_CLOEXEC, mode);
            if (fd < 0) {
                throw new NativeCallException("open", path, errno(state));
            }
            return fd;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("open(" + path + ")", t);
        }
    }

    static void close(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int rc = (int) CLOSE.invokeExact(state, fd);
            if (rc < 0 && errno(state) != EINTR) {
                throw new NativeCallException("close", "fd " + fd, errno(state));
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("close(" + fd + ")", t);
        }
    }

    static void ftruncate(int fd, long size, String what) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int rc = (int) FTRUNCATE.invokeExact(state, fd, size);
            if (rc < 0) {
                throw new NativeCallException("ftruncate", what + ", " + size + " bytes", errno(state));
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("ftruncate(" + what + ")", t);
        }
    }

    /** What {@code fstat} says of an open file: its type and permission bits, its owner and its size. */
    record FileStatus(int mode, int uid, long size) {
        static final int S_IFMT = 0170000;
        static final int S_IFREG = 0100000;

        boolean isRegularFile() {
            return (mode & S_IFMT) == S_IFREG;
        }

        /** The permission bits, {@code 0600} for instance. */
        int permissions() {
            return mode & 07777;
        }
    }

    /** {@code fstat(fd)}: the file the descriptor refers to, whatever its path points at now. */
    static FileStatus fstat(int fd, String what) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment stat = arena.allocate(STAT_SIZE, 8);
            long rc = (long) SYSCALL_FSTAT.invokeExact(state, SYS_FSTAT, fd, stat);
            if (rc < 0) {
                throw new NativeCallException("fstat", what, errno(state));
            }
            return new FileStatus(stat.get(ValueLayout.JAVA_INT, STAT_MODE), stat.get(ValueLayout.JAVA_INT, STAT_UID),
                stat.get(ValueLayout.JAVA_LONG, STAT_BYTES));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("fstat(" + what + ")", t);
        }
    }

    /** {@code geteuid()}: the user whose files this process creates and may trust. */
    static int geteuid() {
        try {
            return (int) GETEUID.invokeExact();
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("geteuid()", t);
        }
    }

    /** Maps {@code size} bytes of {@code fd} shared, readable and writable; the address. */
    static long mmapShared(int fd, long size, String what) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            long address = (long) MMAP.invokeExact(state, 0L, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0L);
            if (address == MAP_FAILED) {
                throw new NativeCallException("mmap", what + ", " + size + " bytes", errno(state));
            }
            return address;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("mmap(" + what + ")", t);
        }
    }

    static void munmap(long address, long size, String what) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int rc = (int) MUNMAP.invokeExact(state, address, size);
            if (rc < 0) {
                throw new NativeCallException("munmap", what, errno(state));
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("munmap(" + what + ")", t);
        }
    }

    /**
     * {@code syscall(SYS_futex, word, op, value, timeout, NULL, 0)}: the result, or minus the errno.
     * {@code timeoutNanos} below zero means no timeout.
     */
    static long futex(MemorySegment word, int op, int value, long timeoutNanos) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment timeout = MemorySegment.NULL;
            if (timeoutNanos >= 0) {
                timeout = arena.allocate(TIMESPEC);
                timeout.set(ValueLayout.JAVA_LONG, 0, timeoutNanos / 1_000_000_000L);
                timeout.set(ValueLayout.JAVA_LONG, 8, timeoutNanos % 1_000_000_000L);
            }
            long result = (long) SYSCALL_FUTEX.invokeExact(state, SYS_FUTEX, word, op, value, timeout, MemorySegment.NULL, 0);
            return result >= 0 ? result : -errno(state);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("futex", t);
        }
    }

    /** {@code kill(pid, 0)}: 0 if the process exists, else the errno ({@link #ESRCH} when it does not). */
    static int probeProcess(int pid) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int rc = (int) KILL.invokeExact(state, pid, 0);
            return rc == 0 ? 0 : errno(state);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("kill(" + pid + ", 0)", t);
        }
    }

    private static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }
}
