package org.dtorch.core.communication.promise;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;

/**
 * A listening TCP socket bound to one address, for a {@code TCPStore} server to take over
 * ({@code TCPStoreOptions.masterListenFd}): c10d's server otherwise listens on every interface, whatever host it is
 * given, so a server meant for loopback would be reachable from the network. The socket's file descriptor is handed to
 * the store, which closes it with itself. Public for the Network store's {@code RendezvousServer}
 * (org.dtorch.core.communication.store), which binds the same way.
 *
 * <p>The addresses passed to {@code bind} (Linux, network byte order in the port and address fields):
 *
 * <pre>
 *   sockaddr_in (16 bytes)            sockaddr_in6 (28 bytes)
 *   offset size field                 offset size field
 *   0      2    family (AF_INET)      0      2    family (AF_INET6)
 *   2      2    port                  2      2    port
 *   4      4    address               4      4    flow info
 *   8      8    zero                  8      16   address
 *                                     24     4    scope id
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
public final class StoreListenSocket {
    private static final int AF_INET = 2;
    private static final int AF_INET6 = 10;
    private static final int SOCK_STREAM_CLOEXEC = 1 | 0x80000;
    private static final int BACKLOG = 128;
    private static final int SOL_SOCKET = 1;
    private static final int SO_REUSEADDR = 2;
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option ERRNO_OPTION = Linker.Option.captureCallState("errno");
    private static final MethodHandle SOCKET = handle("socket",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle BIND = handle("bind",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    private static final MethodHandle LISTEN = handle("listen",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle GETSOCKNAME = handle("getsockname",
        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    private static final MethodHandle CLOSE = handle("close", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle SETSOCKOPT = handle("setsockopt", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
        ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));

    private StoreListenSocket() {
    }

    /**
     * A bound, listening socket: its descriptor and its port (the one asked for, or the one the kernel chose).
     *
     * @param fd   the socket's file descriptor
     * @param port its port
     */
    public record Bound(int fd, int port) {
    }

    private static MethodHandle handle(String name, FunctionDescriptor descriptor) {
        Linker linker = Linker.nativeLinker();
        MemorySegment symbol = linker.defaultLookup().find(name)
            .orElseThrow(() -> new UnsupportedOperationException("the C library has no '" + name + "'; a bound TCPStore needs Linux"));
        return linker.downcallHandle(symbol, descriptor, ERRNO_OPTION);
    }

    /**
     * Listens on a free port of {@code host}'s address (its first, as the resolver gives it).
     *
     * @throws IllegalArgumentException if {@code host} does not resolve
     * @throws IllegalStateException    naming the call, the address and errno if the socket cannot be bound
     */
    static Bound listen(String host) {
        return listen(host, 0);
    }

    /**
     * Listens on {@code port} of {@code host}'s address (its first, as the resolver gives it); port 0 is a free port
     * the kernel chooses. A given port is bound with {@code SO_REUSEADDR}, so a server restarted on it does not wait out
     * the last one's closed connections.
     *
     * @throws IllegalArgumentException if {@code host} does not resolve or the port is not in [0, 65535]
     * @throws IllegalStateException    naming the call, the address and errno if the socket cannot be bound
     */
    public static Bound listen(String host, int port) {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("a TCPStore port is 0 to 65535, got " + port + " (host " + host + ")");
        }
        InetAddress address;
        try {
            address = InetAddress.getByName(host);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("the TCPStore host '" + host + "' does not resolve", e);
        }
        boolean v6 = address instanceof Inet6Address;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment sockaddr = arena.allocate(v6 ? 28 : 16);
            sockaddr.set(ValueLayout.JAVA_SHORT, 0, (short) (v6 ? AF_INET6 : AF_INET));
            sockaddr.set(ValueLayout.JAVA_SHORT, 2, Short.reverseBytes((short) port));
            MemorySegment.copy(address.getAddress(), 0, sockaddr, ValueLayout.JAVA_BYTE, v6 ? 8 : 4, address.getAddress().length);
            if (v6) {
                sockaddr.set(ValueLayout.JAVA_INT, 24, ((Inet6Address) address).getScopeId());
            }
            int fd = (int) SOCKET.invokeExact(state, v6 ? AF_INET6 : AF_INET, SOCK_STREAM_CLOEXEC, 0);
            check(fd, "socket", address, state);
            try {
                if (port != 0) {
                    MemorySegment one = arena.allocate(ValueLayout.JAVA_INT);
                    one.set(ValueLayout.JAVA_INT, 0, 1);
                    check((int) SETSOCKOPT.invokeExact(state, fd, SOL_SOCKET, SO_REUSEADDR, one, (int) one.byteSize()), "setsockopt",
                        address, state);
                }
                check((int) BIND.invokeExact(state, fd, sockaddr, (int) sockaddr.byteSize()), "bind", address, state);
                check((int) LISTEN.invokeExact(state, fd, BACKLOG), "listen", address, state);
                MemorySegment length = arena.allocate(ValueLayout.JAVA_INT);
                length.set(ValueLayout.JAVA_INT, 0, (int) sockaddr.byteSize());
                check((int) GETSOCKNAME.invokeExact(state, fd, sockaddr, length), "getsockname", address, state);
            } catch (RuntimeException e) {
                close(fd);
                throw e;
            }
            return new Bound(fd, Short.toUnsignedInt(Short.reverseBytes(sockaddr.get(ValueLayout.JAVA_SHORT, 2))));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException("binding a TCPStore socket to " + host + " failed", e);
        }
    }

    /** Closes a descriptor that no store took. */
    public static void close(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            int _ = (int) CLOSE.invokeExact(arena.allocate(CALL_STATE), fd);
        } catch (Throwable e) {
            throw new IllegalStateException("close(" + fd + ") failed", e);
        }
    }

    private static void check(int result, String call, InetAddress address, MemorySegment state) {
        if (result < 0) {
            throw new IllegalStateException(call + " for a TCPStore on " + address.getHostAddress() + " failed: errno "
                + (int) ERRNO.get(state, 0L));
        }
    }
}
