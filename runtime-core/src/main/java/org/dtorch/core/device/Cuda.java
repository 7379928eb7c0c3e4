package org.dtorch.core.device;

import java.util.Map;
import java.util.Objects;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.pytorch.global.torch_cuda;

/**
 * Whether this process can run CUDA work, and the one place that loads libtorch's CUDA natives.
 *
 * <p>libtorch decides once per process whether it has CUDA: if any libtorch call runs before its CUDA
 * library is loaded, it caches "no CUDA hooks" and every CUDA tensor fails later. {@link #loadNatives()}
 * therefore runs at every entry point (runtime start, worker main, the launcher, the test launcher)
 * before any tensor is touched. With the default build (libtorch's CPU natives) it does nothing; with
 * the {@code -Pgpu} build it loads {@code torch_cuda}, which needs the CUDA 13 libraries (cudart, cuBLAS,
 * cuDNN 9, NCCL 2, ...) on {@code LD_LIBRARY_PATH}.
 *
 * <p>{@link #require(Device)} is the single check before CUDA work: it throws {@link CudaUnavailableException}
 * naming what is missing (the GPU build, a library, the driver, the device) and the fix.
 *
 * <p>Thread-safe: the state is computed once under the class lock and then immutable.
 */
public final class Cuda {
    /** System property: {@code false} never loads the CUDA natives even when the GPU build is on the class path. */
    public static final String ENABLED_PROPERTY = "dtorch.cuda.enabled";
    /** What the user runs to get libtorch's CUDA natives. */
    public static final String GPU_BUILD_HINT = "build with the GPU natives: mvn -B -Pgpu -DskipTests install";
    private static final String LIBRARY_HINT = "put the CUDA 13 libraries (cudart, cuBLAS, cuDNN 9, cuSPARSE, cuFFT, "
        + "cuRAND, cuSOLVER, cuPTI, cuFile, NCCL 2) on LD_LIBRARY_PATH; see docs/gpu.md";

    private static State state;

    private Cuda() {
    }

    /** What {@link #loadNatives()} found. */
    private record State(boolean available, int deviceCount, String problem) {
    }

    /**
     * Loads libtorch's CUDA natives when this build has them; idempotent and cheap after the first call.
     * Never throws: a failure is remembered and reported by {@link #require(Device)}.
     */
    public static synchronized void loadNatives() {
        if (state == null) {
            state = probe();
        }
    }

    private static State probe() {
        if (!Boolean.parseBoolean(System.getProperty(ENABLED_PROPERTY, "true"))) {
            return new State(false, 0, "CUDA is switched off (-D" + ENABLED_PROPERTY + "=false)");
        }
        if (!hasGpuNatives()) {
            return new State(false, 0, "this build has libtorch's CPU natives only; " + GPU_BUILD_HINT);
        }
        Map<String, String> loaded = Loader.getLoadedLibraries();
        boolean torchFirst = loaded.keySet().stream().anyMatch(name -> name.contains("jnitorch") && !name.contains("cuda"));
        if (torchFirst) {
            return new State(false, 0, "libtorch was loaded before its CUDA library, so it has no CUDA for this process: "
                + "call org.dtorch.core.device.Cuda.loadNatives() before the first tensor (DTorch.init and the runtime do)");
        }
        try {
            Loader.load(torch_cuda.class);
        } catch (UnsatisfiedLinkError | RuntimeException e) {
            return new State(false, 0, "libtorch's CUDA natives did not load (" + firstLine(e) + "); " + LIBRARY_HINT);
        }
        try {
            if (!torch_cuda.is_available()) {
                return new State(false, 0, "no CUDA device is visible (no NVIDIA driver, no GPU, or CUDA_VISIBLE_DEVICES='"
                    + Objects.requireNonNullElse(System.getenv("CUDA_VISIBLE_DEVICES"), "") + "')");
            }
            return new State(true, torch_cuda.device_count(), null);
        } catch (RuntimeException e) {
            return new State(false, 0, "CUDA did not initialize (" + firstLine(e) + ")");
        }
    }

    /** True when the class path holds libtorch's CUDA natives for this platform (the {@code -Pgpu} build). */
    static boolean hasGpuNatives() {
        String folder = "org/bytedeco/pytorch/" + Loader.getPlatform() + "-gpu/";
        ClassLoader loader = Cuda.class.getClassLoader();
        return loader.getResource(folder) != null || loader.getResource(folder + System.mapLibraryName("jnitorch_cuda")) != null;
    }

    /** True when CUDA tensors can be made in this process. */
    public static boolean isAvailable() {
        loadNatives();
        return current().available();
    }

    /** The number of CUDA devices this process sees; zero where CUDA is not available. */
    public static int deviceCount() {
        loadNatives();
        return current().deviceCount();
    }

    /** Why CUDA is not available, with the fix; {@code null} when it is. */
    public static String unavailableReason() {
        loadNatives();
        return current().problem();
    }

    /**
     * Checks that {@code device} can run CUDA work here.
     *
     * @throws CudaUnavailableException naming what is missing and the fix
     */
    public static void require(Device device) {
        Objects.requireNonNull(device, "device");
        if (device.kind() != DeviceKind.CUDA) {
            return;
        }
        loadNatives();
        State s = current();
        if (!s.available()) {
            throw new CudaUnavailableException(device + " is not usable: " + s.problem());
        }
        if (device.index() >= s.deviceCount()) {
            throw new CudaUnavailableException(device + " does not exist: this process sees " + s.deviceCount()
                + " CUDA device" + (s.deviceCount() == 1 ? "" : "s") + " (cuda:0 to cuda:" + (s.deviceCount() - 1)
                + "); use --same-device to put several ranks on one GPU");
        }
    }

    /**
     * Checks that {@code count} CUDA devices exist, or that one exists when {@code sameDevice}.
     *
     * @throws CudaUnavailableException naming what is missing and the fix
     */
    public static void requireDevices(int count, boolean sameDevice) {
        require(Device.cuda(0));
        int needed = sameDevice ? 1 : count;
        if (needed > deviceCount()) {
            throw new CudaUnavailableException(count + " CUDA devices asked for, but this process sees " + deviceCount()
                + ": use sameDevice (--same-device) to run several ranks on one GPU");
        }
    }

    /** The calling thread's current CUDA device (libtorch's {@code current_device()}), checked usable. */
    public static Device currentDevice() {
        require(Device.cuda(0));
        Device device = Device.cuda(torch_cuda.current_device());
        require(device);
        return device;
    }

    /**
     * Makes {@code device} the calling thread's current CUDA device, where libtorch allocates and launches by
     * default. A device worker calls it once, before it makes its stream current.
     */
    public static void setCurrentDevice(Device device) {
        require(device);
        if (device.kind() == DeviceKind.CUDA) {
            torch_cuda.set_device((byte) device.index());
        }
    }

    /**
     * Makes {@code device} current on the calling thread for a driver API call (its primary context, which is the
     * one libtorch uses); returns the device that was current, for {@link #restoreDevice}.
     */
    static int makeCurrentForDriver(int device) {
        int[] current = new int[1];
        checkRuntime(cudart.cudaGetDevice(current), "cudaGetDevice");
        if (current[0] != device) {
            checkRuntime(cudart.cudaSetDevice(device), "cudaSetDevice(" + device + ")");
        }
        return current[0];
    }

    /** Undoes {@link #makeCurrentForDriver}. */
    static void restoreDevice(int previous, int device) {
        if (previous != device) {
            checkRuntime(cudart.cudaSetDevice(previous), "cudaSetDevice(" + previous + ")");
        }
    }

    /** Throws, naming {@code call} and CUDA's error, unless a runtime API call succeeded. */
    static void checkRuntime(int result, String call) {
        if (result != cudart.cudaSuccess) {
            cudart.cudaGetLastError(); // clear it, or libtorch's next launch check reports it as its own
            BytePointer text = cudart.cudaGetErrorString(result);
            throw new IllegalStateException(call + " failed: " + (text == null || text.isNull() ? "CUDA error" : text.getString())
                + " (" + result + ")");
        }
    }

    /** The name of a driver API result. */
    static String driverError(int result) {
        try (PointerPointer<BytePointer> name = new PointerPointer<>(1)) {
            if (cudart.cuGetErrorName(result, name) == cudart.CUDA_SUCCESS && name.get(0) != null) {
                return name.get(BytePointer.class, 0).getString() + " (" + result + ")";
            }
        }
        return "CUresult " + result;
    }

    private static synchronized State current() {
        return state;
    }

    private static String firstLine(Throwable e) {
        String message = String.valueOf(e.getMessage());
        int newline = message.indexOf('\n');
        return newline < 0 ? message : message.substring(0, newline);
    }
}
