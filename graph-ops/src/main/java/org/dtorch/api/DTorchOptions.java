package org.dtorch.api;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.runtime.MemoryWatch;
import org.dtorch.core.runtime.RuntimeOptions;
import org.dtorch.core.runtime.process.NodeSpec;

/**
 * How {@link DTorch#init(DTorchOptions)} sets up a runtime: devices, the default mesh, timeouts, and the
 * same-device simulation. Defaults: 4 CPU devices as threads, a 1-D default mesh over all of them, the
 * global communication timeout (300 s), 2 s to drain at close ({@link RuntimeOptions#DEFAULT_SHUTDOWN_TIMEOUT}). A null
 * argument to a builder method is a {@link NullPointerException} naming it.
 *
 * <p>Thread-safe: immutable.
 */
public final class DTorchOptions {
    /** The number of devices when none is given. */
    public static final int DEFAULT_DEVICES = 4;
    private final RuntimeOptions runtime;
    private final int[] meshShape;
    private final List<String> meshDimNames;
    private final Path trace;
    private final boolean implicitRedistribution;

    private DTorchOptions(Builder b) {
        this.trace = b.trace;
        this.implicitRedistribution = b.implicitRedistribution;
        this.runtime = new RuntimeOptions(b.kind, b.devices, b.sameDevice, b.perDevicePerProcess, b.timeout, b.shutdownTimeout,
            b.memoryWatch, b.nodes);
        this.meshShape = b.meshShape == null ? new int[] {b.devices} : b.meshShape.clone();
        this.meshDimNames = List.copyOf(b.meshDimNames);
        long count = 1;
        for (int s : meshShape) {
            count *= s;
        }
        if (count != b.devices) {
            throw new IllegalArgumentException("the default mesh shape " + java.util.Arrays.toString(meshShape) + " holds " + count
                + " devices, but the runtime has " + b.devices);
        }
    }

    /** A builder with the defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /** The defaults. */
    public static DTorchOptions defaults() {
        return builder().build();
    }

    /** The runtime's options. */
    public RuntimeOptions runtime() {
        return runtime;
    }

    /** The default mesh's shape. */
    public int[] meshShape() {
        return meshShape.clone();
    }

    /** The default mesh's dimension names (possibly empty). */
    public List<String> meshDimNames() {
        return meshDimNames;
    }

    /** Where the runtime writes its trace when it closes ({@link Builder#trace}), if anywhere. */
    public Optional<Path> trace() {
        return Optional.ofNullable(trace);
    }

    /**
     * Whether operators redistribute inputs whose placements fit none of their strategies ({@link Builder#implicitRedistribution};
     * {@link DTorch#setImplicitRedistribution} changes it for a running runtime).
     */
    public boolean implicitRedistribution() {
        return implicitRedistribution;
    }

    /**
     * Builds {@link DTorchOptions}.
     *
     * <p>Not thread-safe: one thread fills a builder.
     */
    public static final class Builder {
        private DeviceKind kind = DeviceKind.CPU;
        private int devices = DEFAULT_DEVICES;
        private boolean sameDevice;
        private boolean perDevicePerProcess;
        private Duration timeout = CommOptions.global().timeout();
        private Duration shutdownTimeout = RuntimeOptions.DEFAULT_SHUTDOWN_TIMEOUT;
        private MemoryWatch memoryWatch = MemoryWatch.DEFAULTS;
        private int[] meshShape;
        private List<String> meshDimNames = List.of();
        private Path trace;
        private NodeSpec nodes;
        private boolean implicitRedistribution = true;

        private Builder() {
        }

        /**
         * Records a timeline of the whole run ({@link DTorch#profiler()}) and writes it to {@code path} as Chrome
         * trace event JSON when the runtime closes (docs/observability.md); default none.
         */
        public Builder trace(Path path) {
            this.trace = Objects.requireNonNull(path, "trace: path is null");
            return this;
        }

        /**
         * Spans the run over the nodes of {@code spec} (this process is node 0 and runs the controller; every node runs
         * {@link NodeSpec#devicesPerNode()} worker processes, and {@link #devices(int)} becomes their total); null, the
         * default, stays on one host. See docs/multi-host.md.
         */
        public Builder nodes(NodeSpec spec) {
            this.nodes = spec;
            if (spec != null) {
                this.devices = spec.deviceCount();
            }
            return this;
        }

        /** The number of devices; default 4. */
        public Builder devices(int count) {
            this.devices = count;
            return this;
        }

        /**
         * Kind and number of devices as the launcher writes them: {@code cpu:4} or {@code cuda:2}. With more CUDA
         * devices than GPUs, also set {@link #sameDevice(boolean)}.
         *
         * @throws IllegalArgumentException if {@code spec} is not {@code cpu:N} or {@code cuda:N} with N >= 1
         */
        public Builder devices(String spec) {
            Objects.requireNonNull(spec, "devices: spec is null");
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("(cpu|cuda):([1-9][0-9]{0,5})").matcher(spec.trim());
            if (!m.matches()) {
                throw new IllegalArgumentException("devices: expected cpu:N or cuda:N with N >= 1, got '" + spec + "'");
            }
            this.kind = m.group(1).equals("cpu") ? DeviceKind.CPU : DeviceKind.CUDA;
            this.devices = Integer.parseInt(m.group(2));
            return this;
        }

        /** The device kind; default CPU. */
        public Builder deviceKind(DeviceKind value) {
            this.kind = Objects.requireNonNull(value, "deviceKind: value is null");
            return this;
        }

        /** Simulate every device on one physical device (same-device collectives); default off. */
        public Builder sameDevice(boolean value) {
            this.sameDevice = value;
            return this;
        }

        /**
         * One worker process (JVM) per device instead of a worker thread; default off. Works for CPU and CUDA devices
         * ({@code cuda:N} workers see the host's GPUs as this process does; with {@link #sameDevice(boolean)} every
         * worker runs on {@code cuda:0}).
         */
        public Builder perDevicePerProcess(boolean value) {
            this.perDevicePerProcess = value;
            return this;
        }

        /**
         * Deadline of every blocking call of the runtime, the kernels' and the client's ({@code get()} and
         * {@code sync()} of the futures it returns, Python's {@code await}); default the global communication
         * timeout.
         */
        public Builder timeout(Duration value) {
            this.timeout = Objects.requireNonNull(value, "timeout: value is null");
            return this;
        }

        /**
         * How long {@code close()} waits for queued work before cancelling it; default 2 s. The teardown after it
         * takes at most 1.5 s more, whatever the devices are blocked in.
         */
        public Builder shutdownTimeout(Duration value) {
            this.shutdownTimeout = Objects.requireNonNull(value, "shutdownTimeout: value is null");
            return this;
        }

        /**
         * When a device warns, once, that the bytes of its tensors grow without bound: after they rose at each of
         * {@code syncs} consecutive {@code sync()}s and reached {@code floorBytes} ({@link MemoryWatch}); default 10
         * syncs and 1 GiB, {@code syncs} 0 never warns.
         *
         * @throws IllegalArgumentException if {@code syncs} or {@code floorBytes} is negative
         */
        public Builder memoryGrowthWarning(int syncs, long floorBytes) {
            this.memoryWatch = new MemoryWatch(syncs, floorBytes);
            return this;
        }

        /** The shape and dimension names of the default mesh; default 1-D over all devices. */
        public Builder defaultMesh(int[] shape, String... dimNames) {
            this.meshShape = Objects.requireNonNull(shape, "defaultMesh: shape is null").clone();
            this.meshDimNames = DTorch.nonNullElements("defaultMesh", "dimNames", dimNames);
            return this;
        }

        /**
         * Whether an operator whose inputs' placements fit none of its strategies redistributes them itself, the
         * cheapest way, as PyTorch DTensor does (default true); false is the strict mode, where such an operator is
         * refused, naming the placements it takes, and every collective is one the program wrote.
         */
        public Builder implicitRedistribution(boolean value) {
            this.implicitRedistribution = value;
            return this;
        }

        /** The validated options. */
        public DTorchOptions build() {
            return new DTorchOptions(this);
        }
    }
}
