package org.dtorch.python;

import java.lang.management.ClassLoadingMXBean;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import org.bytedeco.javacpp.Loader;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.device.Cuda;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;

/**
 * Times each part of what {@code ./dtorch run} does before and around a script, in the order the launcher does it:
 * the JVM up to {@code main}, libtorch's natives, the runtime's devices and groups, the GraalPy context,
 * {@code import dtorch}, {@code import torch}, the script, and the closing; then the same again {@code rounds - 1}
 * times in the same JVM (a fresh engine, context and runtime each time), which is what a warm JVM saves. Per part it
 * prints the wall time, the process's CPU time (above the wall time where compiler threads work in parallel), the
 * classes loaded and HotSpot's compilation time.
 *
 * <p>{@code benchmarks/startup/start-breakdown.sh [rounds] [script.py]} runs it with the launcher's JVM flags.
 *
 * <p>Not thread-safe: a program entry point.
 */
final class StartBreakdown {
    private final ClassLoadingMXBean classes = ManagementFactory.getClassLoadingMXBean();
    private final CompilationMXBean compiler = ManagementFactory.getCompilationMXBean();
    private final com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private long wall;
    private long cpu;
    private long loaded;
    private long compiled;

    private StartBreakdown() {
        mark();
    }

    public static void main(String[] args) throws Exception {
        Instant processStart = ProcessHandle.current().info().startInstant().orElseThrow();
        long toMainMillis = Duration.between(processStart, Instant.now()).toMillis();
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        Path script = args.length > 1 ? Path.of(args[1]) : Files.writeString(Files.createTempFile("hi", ".py"), "print('hi')\n");
        StartBreakdown b = new StartBreakdown();
        System.out.printf(Locale.ROOT, "%-34s %9s %9s %8s %9s%n", "part", "wall ms", "cpu ms", "classes", "jit ms");
        System.out.printf(Locale.ROOT, "%-34s %9d %9s %8d %9s%n", "JVM start to main (incl. measuring)", toMainMillis, "-",
            b.classes.getTotalLoadedClassCount(), "-");
        Cuda.loadNatives();
        Loader.load(org.bytedeco.pytorch.global.torch.class);
        b.row("libtorch natives");
        for (int round = 1; round <= rounds; round++) {
            System.out.println("-- round " + round + (round == 1 ? " (cold JVM)" : " (same JVM, fresh engine/context/runtime)"));
            DTorch runtime = DTorch.init(DTorchOptions.builder().build());
            b.row("runtime: 4 CPU devices and groups");
            PythonHost host = PythonHost.builder().bridge(new PyBridge(runtime)).build();
            b.row("GraalPy context (new engine)");
            host.eval("1");
            b.row("Python's initialization (site)");
            host.eval("import os, runpy, sys, traceback");
            b.row("the launcher's imports (runpy)");
            host.eval("import torch");
            b.row("import torch");
            host.eval("import dtorch");
            b.row("import dtorch");
            int status = host.runScript(script, List.of());
            b.row("the script (exit " + status + ")");
            host.close();
            b.row("context close");
            runtime.close();
            b.row("runtime close");
        }
    }

    private void mark() {
        wall = System.nanoTime();
        cpu = os.getProcessCpuTime();
        loaded = classes.getTotalLoadedClassCount();
        compiled = compiler.getTotalCompilationTime();
    }

    private void row(String part) {
        long w = System.nanoTime() - wall;
        long c = os.getProcessCpuTime() - cpu;
        long l = classes.getTotalLoadedClassCount() - loaded;
        long j = compiler.getTotalCompilationTime() - compiled;
        System.out.printf(Locale.ROOT, "%-34s %9d %9d %8d %9d%n", part, w / 1_000_000, c / 1_000_000, l, j);
        System.out.flush();
        mark();
    }
}
