package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.tensor.NativeMemoryBudget;
import org.dtorch.core.testing.ChildJvmLoop;
import org.dtorch.core.testing.ResidentMemory;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A Java loop that drops every handle and value without closing them runs in bounded memory: the native
 * memory budget makes the runtime request collections, whose Cleaners release what the loop dropped.
 * Before, the Java heap never asked for one and the loop grew by megabytes per iteration. The bounds are
 * in {@link ResidentMemory}. Every build loops {@value #SHORT} times: each iteration allocates several MiB against
 * the budget's 512 MiB, so the runtime requests collections many times over, and a loop that kept what it dropped
 * would cross the bounds. The {@code slow} run loops {@value #LONG} times (process mode runs about 17 ms an
 * iteration on two cores); {@value #ITERATIONS_PROPERTY} sets another count for both.
 */
@Timeout(1800)
class DroppedHandlesMemoryTest {
    static final String ITERATIONS_PROPERTY = "dtorch.test.memoryLoopIterations";
    static final int SHORT = 300;
    static final int LONG = 20_000;

    /** Per-device-process mode instead of threads; {@code DroppedHandlesMemoryInProcessesTest} turns it on. */
    boolean processes() {
        return false;
    }

    /** The loop runs in a JVM of its own, so that what other tests left in this one does not count. */
    @Test
    void shouldStayWithinBoundsWhenALoopDropsItsHandlesAndValues() throws Exception {
        loopInAChildJvm(Integer.getInteger(ITERATIONS_PROPERTY, SHORT));
    }

    @Test
    @Tag("slow")
    void shouldStayWithinBoundsOverTwentyThousandIterations() throws Exception {
        loopInAChildJvm(Integer.getInteger(ITERATIONS_PROPERTY, LONG));
    }

    private void loopInAChildJvm(int iterations) throws Exception {
        ChildJvmLoop.runAndCheck(DroppedHandlesMemoryTest.class, List.of(String.valueOf(processes()), String.valueOf(iterations)),
            Duration.ofMinutes(25));
    }

    /** The loop itself, in a fresh JVM: {@code args[0]} is true for worker processes, {@code args[1]} the iterations. */
    public static void main(String[] args) {
        ChildJvmLoop.exitWith(() -> loop(Boolean.parseBoolean(args[0]), Integer.parseInt(args[1])));
    }

    private static void loop(boolean processes, int iterations) {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(2).perDevicePerProcess(processes)
                .timeout(Duration.ofSeconds(60)).build())) {
            long requestsBefore = NativeMemoryBudget.global().collectionsRequested();
            long start = System.nanoTime();
            ResidentMemory peak = ResidentMemory.of(dt.runtime());
            for (int i = 1; i <= iterations; i++) {
                DTensor x = dt.ones(256, 1024);               // 1 MiB, replicated on both devices
                Tensor v = x.mul(2.0).toTorch();              // dropped, like x and the product
                if (i % 200 == 0) {
                    assertEquals(2.0f, v.data_ptr_float().get(), "the values must still be right");
                    ResidentMemory now = ResidentMemory.of(dt.runtime());
                    peak = now.total() > peak.total() ? now : peak;
                    assertTrue(now.withinBounds(), "after " + i + " iterations the runtime holds " + now + "; "
                        + NativeMemoryBudget.global());
                }
            }
            System.out.printf("%s: peak %s over %d iterations in %d s; %d collections requested; %s%n",
                processes ? "worker processes" : "threads", peak, iterations, (System.nanoTime() - start) / 1_000_000_000,
                NativeMemoryBudget.global().collectionsRequested() - requestsBefore, NativeMemoryBudget.global());
        }
    }
}
