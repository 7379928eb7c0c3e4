package org.dtorch.core.device;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * NVTX ranges, which Nsight Systems draws on the thread that pushed them: {@code nvtxRangePushA} and
 * {@code nvtxRangePop}, called through the FFM API in a library that exports them (docs/observability.md, "CUDA").
 *
 * <p>Neither binding ships one: Bytedeco's CUDA 13 presets have no {@code nvToolsExt} class or JNI library, and CUDA
 * 13's NVTX 3 is header-only (libtorch inlines it and exports nothing). The library is
 * {@code -Ddtorch.nvtx.library=PATH}, else the first of {@link #DEFAULT_LIBRARIES} on the loader's path: CUDA 13's
 * {@code libnvtx3interop.so.1} (in the toolkit's and in PyTorch's {@code nvidia/cu13/lib}; found on the H200 machine,
 * where it exports both calls), then CUDA 12's {@code libnvToolsExt.so.1}. Without one every call is counted and does nothing else: a
 * range is then no error, only invisible ({@link #unavailableReason()} says why). The library is looked up when this
 * class is first used, which only a CUDA device with the tracer on does.
 *
 * <p>Thread-safe: any thread may push and pop its own ranges.
 */
public final class Nvtx {
    /** System property: the path (or loader name) of the library that exports the NVTX API. */
    public static final String LIBRARY_PROPERTY = "dtorch.nvtx.library";
    /** The libraries tried in order when {@link #LIBRARY_PROPERTY} is not set: CUDA 13's NVTX 3 interop, then CUDA 12's NVTX 2. */
    public static final List<String> DEFAULT_LIBRARIES = List.of("libnvtx3interop.so.1", "libnvToolsExt.so.1");
    /** Range names kept as C strings for the life of the process: once about this many are kept, new ones are encoded per call. */
    static final int NAME_CACHE_LIMIT = 4096;

    private static final Nvtx PROCESS = loadFirst(System.getProperty(LIBRARY_PROPERTY) != null
        ? List.of(System.getProperty(LIBRARY_PROPERTY)) : DEFAULT_LIBRARIES);

    private final MethodHandle push;
    private final MethodHandle pop;
    /** Why no library is called, or null. */
    final String unavailable;
    private final Map<String, MemorySegment> names = new ConcurrentHashMap<>();
    final LongAdder pushes = new LongAdder();
    final LongAdder pops = new LongAdder();
    final LongAdder nativeCalls = new LongAdder();

    private Nvtx(MethodHandle push, MethodHandle pop, String unavailable) {
        this.push = push;
        this.pop = pop;
        this.unavailable = unavailable;
    }

    /** The NVTX API of the first of {@code libraries} that loads, or counting only when none does (never throws). */
    static Nvtx loadFirst(List<String> libraries) {
        Nvtx found = null;
        for (String library : libraries) {
            found = load(library);
            if (found.unavailable == null) {
                return found;
            }
        }
        return found;
    }

    /** The NVTX API of {@code library}, or counting only when it cannot be loaded (never throws). */
    static Nvtx load(String library) {
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup lookup = SymbolLookup.libraryLookup(library, Arena.global());
            FunctionDescriptor push = FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS);
            FunctionDescriptor pop = FunctionDescriptor.of(ValueLayout.JAVA_INT);
            return new Nvtx(linker.downcallHandle(lookup.findOrThrow("nvtxRangePushA"), push),
                linker.downcallHandle(lookup.findOrThrow("nvtxRangePop"), pop), null);
        } catch (RuntimeException | LinkageError e) {
            return new Nvtx(null, null, "no NVTX library: " + library + " did not load (" + e.getMessage() + "); set -D"
                + LIBRARY_PROPERTY + "=PATH to a library exporting nvtxRangePushA (CUDA 13's libnvtx3interop.so.1, "
                + "CUDA 12's libnvToolsExt.so.1, or one built from the NVTX 3 headers with NVTX_EXPORT_API: docs/observability.md)");
        }
    }

    /** Opens a range named {@code name} on the calling thread; close it with {@link #rangePop()} on the same thread. */
    public static void rangePush(String name) {
        PROCESS.push(name);
    }

    /** Closes the calling thread's innermost range. */
    public static void rangePop() {
        PROCESS.pop();
    }

    /** True when the NVTX library loaded, so ranges reach a tool that is attached (Nsight Systems). */
    public static boolean available() {
        return PROCESS.unavailable == null;
    }

    /** Why ranges reach no tool, or null when the library loaded. */
    public static String unavailableReason() {
        return PROCESS.unavailable;
    }

    /** Ranges pushed in this process, whether or not the library loaded. */
    public static long rangesPushed() {
        return PROCESS.pushes.sum();
    }

    /** Ranges popped in this process, whether or not the library loaded. */
    public static long rangesPopped() {
        return PROCESS.pops.sum();
    }

    /** Calls that reached the library ({@code nvtxRangePushA} and {@code nvtxRangePop} together). */
    public static long nativeCalls() {
        return PROCESS.nativeCalls.sum();
    }

    /** Pushes a range; returns the library's answer (the nesting level, or a negative code with no tool), or -1 without one. */
    int push(String name) {
        pushes.increment();
        if (push == null) {
            return -1;
        }
        try {
            MemorySegment cached = names.size() < NAME_CACHE_LIMIT
                ? names.computeIfAbsent(name, n -> Arena.global().allocateFrom(n)) : names.get(name);
            if (cached != null) {
                return call(push, cached);
            }
            try (Arena call = Arena.ofConfined()) {
                return call(push, call.allocateFrom(name));
            }
        } catch (Throwable e) {
            throw new IllegalStateException("nvtxRangePushA(\"" + name + "\") failed", e);
        }
    }

    /** Pops a range; returns the library's answer, or -1 without one. */
    int pop() {
        pops.increment();
        if (pop == null) {
            return -1;
        }
        try {
            nativeCalls.increment();
            return (int) pop.invokeExact();
        } catch (Throwable e) {
            throw new IllegalStateException("nvtxRangePop failed", e);
        }
    }

    private int call(MethodHandle handle, MemorySegment name) throws Throwable {
        nativeCalls.increment();
        return (int) handle.invokeExact(name);
    }
}
