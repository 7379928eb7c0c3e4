package org.dtorch.core.communication.group;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Gloo's connection lines ({@code [Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer
 * ranks is : 1}), printed once per rank whenever a group connects. They are muted unless the system property
 * {@value #VERBOSE_PROPERTY} is {@code true} (the launcher sets it for {@code --log-level info} or finer; worker JVMs
 * inherit it with the other {@code dtorch.*} properties).
 *
 * <p>Gloo writes these lines to C++ {@code std::cout} unconditionally ({@code Context::printConnectivityInfo} in
 * {@code gloo/transport/tcp/context.cc}); neither c10's log level ({@code TORCH_CPP_LOG_LEVEL}) nor any Gloo setting
 * reaches them. So {@code std::cout} of libstdc++ is put in its bad state while a group connects, which makes every
 * C++ write to it a no-op, and cleared afterwards. Java's and Python's output do not go through {@code std::cout}; a
 * libtorch print from another thread during a connection would be lost. Where libstdc++'s symbols cannot be found,
 * nothing is muted.
 *
 * <p>Thread-safe: ranks may connect concurrently; the stream stays muted until the last of them is done.
 */
public final class GlooLog {
    /** System property: {@code true} lets Gloo print its connection lines; default {@code false}. */
    public static final String VERBOSE_PROPERTY = "dtorch.gloo.verbose";

    private static final System.Logger LOG = System.getLogger(GlooLog.class.getName());
    private static final Object LOCK = new Object();
    /** How many connections are muting {@code std::cout} now; guarded by {@link #LOCK}. */
    private static int mutedConnections;

    private GlooLog() {
    }

    /**
     * A scope in which Gloo's lines are muted (unless the property lets them through); close it once connected. Public
     * for the Network store's group (org.dtorch.core.communication.store), which connects Gloo itself.
     */
    public static Muting muteWhileConnecting() {
        boolean mute = !Boolean.getBoolean(VERBOSE_PROPERTY) && CxxStdout.IOS != null;
        if (mute) {
            synchronized (LOCK) {
                if (mutedConnections++ == 0) {
                    CxxStdout.setState(CxxStdout.BADBIT);
                }
            }
        }
        return new Muting(mute);
    }

    /** One connection's share of the muting; {@link #close()} is idempotent. Not thread-safe: one connecting thread. */
    public static final class Muting implements AutoCloseable {
        private boolean active;

        private Muting(boolean active) {
            this.active = active;
        }

        @Override
        public void close() {
            if (!active) {
                return;
            }
            active = false;
            synchronized (LOCK) {
                if (--mutedConnections == 0) {
                    CxxStdout.setState(CxxStdout.GOODBIT);
                }
            }
        }
    }

    /**
     * libstdc++'s {@code std::cout}, reached through the FFM API: the {@code std::basic_ios} inside it and its
     * {@code clear(iostate)}. {@code cout} is a {@code std::ostream}, whose {@code basic_ios} is a virtual base: its
     * offset is the vtable's entry 3 words before the address point (Itanium C++ ABI).
     */
    private static final class CxxStdout {
        static final int GOODBIT = 0;
        static final int BADBIT = 1;
        /** The {@code basic_ios<char>} of {@code std::cout}, or null where it cannot be found. */
        static final MemorySegment IOS;
        private static final MethodHandle CLEAR;

        static {
            MemorySegment ios = null;
            MethodHandle clear = null;
            try {
                SymbolLookup libstdcxx = SymbolLookup.libraryLookup("libstdc++.so.6", Arena.global());
                MemorySegment cout = libstdcxx.findOrThrow("_ZSt4cout").reinterpret(ValueLayout.ADDRESS.byteSize());
                MemorySegment vtable = cout.get(ValueLayout.ADDRESS, 0);
                long virtualBaseOffset = MemorySegment.ofAddress(vtable.address() - 3 * ValueLayout.ADDRESS.byteSize())
                    .reinterpret(Long.BYTES).get(ValueLayout.JAVA_LONG, 0);
                ios = MemorySegment.ofAddress(cout.address() + virtualBaseOffset);
                clear = Linker.nativeLinker().downcallHandle(
                    libstdcxx.findOrThrow("_ZNSt9basic_iosIcSt11char_traitsIcEE5clearESt12_Ios_Iostate"),
                    FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.DEBUG, () -> "cannot reach std::cout of libstdc++; Gloo's connection lines stay on: " + e);
                ios = null;
            }
            IOS = ios;
            CLEAR = clear;
        }

        static void setState(int state) {
            try {
                CLEAR.invokeExact(IOS, state);
            } catch (Throwable e) {
                throw new IllegalStateException("std::basic_ios::clear(" + state + ") on std::cout failed", e);
            }
        }
    }
}
