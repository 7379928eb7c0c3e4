package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.tensor.NativeMemoryBudget;
import org.dtorch.core.testing.ChildJvmLoop;
import org.dtorch.core.testing.ResidentMemory;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;
import org.graalvm.polyglot.Value;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A loop that drops everything runs in bounded memory: a Python script that makes a 1 MiB tensor, brings its double back
 * and drops both, thousands of times. GraalPy has no reference counts, so a dropped Python object dies only when the
 * Java collector runs; the native memory budget makes the runtime request one. Before, the loop grew by
 * megabytes per iteration until the kernel killed the JVM. The bounds are in {@link ResidentMemory}. Every build
 * loops {@value #SHORT} times: each iteration allocates several MiB against the native memory budget's 512 MiB, so
 * the runtime requests collections many times over, and a loop that kept what it dropped would cross the bounds.
 * The {@code slow} run loops {@value #LONG} times (on two cores the GraalPy interpreter and the requested collections
 * take about half each of 5 ms an iteration in threads, and the workers about 30 ms an iteration in process mode);
 * {@value #ITERATIONS_PROPERTY} sets another count for both.
 */
@Timeout(1800)
class DroppedValuesMemoryTest {
    static final String ITERATIONS_PROPERTY = "dtorch.test.memoryLoopIterations";
    static final int SHORT = 300;
    static final int LONG = 20_000;
    private static final int CHUNK = 250;

    private static final String LOOP = String.join("\n",
        "import struct, dtorch",
        "def loop(n):",
        "    for i in range(n):",
        "        x = dtorch.ones(256, 1024)",
        "        v = (x * 2).to_torch()",
        "        if i == 0:",
        "            assert v.tobytes()[:4] == struct.pack('f', 2.0), v",
        "        del x, v",
        "");

    /** Per-device-process mode instead of threads; {@code DroppedValuesMemoryInProcessesTest} turns it on. */
    boolean processes() {
        return false;
    }

    /** The loop runs in a JVM of its own, so that what other tests left in this one does not count. */
    @Test
    void shouldLoopOverDroppedTensorsAndValuesInBoundedMemory() throws Exception {
        loopInAChildJvm(Integer.getInteger(ITERATIONS_PROPERTY, SHORT));
    }

    @Test
    @Tag("slow")
    void shouldLoopTwentyThousandTimesInBoundedMemory() throws Exception {
        loopInAChildJvm(Integer.getInteger(ITERATIONS_PROPERTY, LONG));
    }

    private void loopInAChildJvm(int iterations) throws Exception {
        Files.createDirectories(Path.of(System.getProperty("java.io.tmpdir"))); // GraalPy unpacks its files there
        ChildJvmLoop.runAndCheck(DroppedValuesMemoryTest.class, List.of(String.valueOf(processes()), String.valueOf(iterations)),
            Duration.ofMinutes(25));
    }

    /** The loop itself, in a fresh JVM: {@code args[0]} is true for worker processes, {@code args[1]} the iterations. */
    public static void main(String[] args) {
        ChildJvmLoop.exitWith(() -> loop(Boolean.parseBoolean(args[0]), Integer.parseInt(args[1])));
    }

    private static void loop(boolean processes, int iterations) {
        try (DTorch runtime = DTorch.init(DTorchOptions.builder().devices(2).perDevicePerProcess(processes)
                .timeout(Duration.ofSeconds(60)).build());
             PythonHost host = PythonHost.builder().bridge(new PyBridge(runtime)).build()) {
            host.eval(LOOP);
            Value loop = host.eval("loop");
            long requestsBefore = NativeMemoryBudget.global().collectionsRequested();
            long start = System.nanoTime();
            ResidentMemory peak = ResidentMemory.of(runtime.runtime());
            for (int done = 0; done < iterations; ) {
                int n = Math.min(CHUNK, iterations - done);
                loop.execute(n);
                done += n;
                ResidentMemory now = ResidentMemory.of(runtime.runtime());
                peak = now.total() > peak.total() ? now : peak;
                assertTrue(now.withinBounds(), "after " + done + " iterations the runtime holds " + now + "; "
                    + NativeMemoryBudget.global());
            }
            System.out.printf("%s: peak %s over %d iterations in %d s; %d collections requested; %s%n",
                processes ? "worker processes" : "threads", peak, iterations, (System.nanoTime() - start) / 1_000_000_000,
                NativeMemoryBudget.global().collectionsRequested() - requestsBefore, NativeMemoryBudget.global());
        }
    }
}
