package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.kernel.KernelContext;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;
import org.graalvm.polyglot.Value;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Python's {@code get()}, {@code to_torch()} and {@code await} give up at the runtime's timeout (--timeout-seconds). */
@Timeout(120)
class PythonDeadlinesTest {

    /** Passes its input through after {@code millis} on every device (a test-only operator). */
    record Stall(long millis) implements OpSpec {
        @Override
        public String name() {
            return "stall";
        }

        @Override
        public List<TensorMeta> inferOutputs(List<TensorMeta> inputs) {
            return List.of(inputs.getFirst());
        }

        @Override
        public DeviceKernel kernel(Operator op, long deviceId) {
            return new DeviceKernel() {
                @Override
                public List<Tensor> run(KernelContext ctx, List<Tensor> inputs) {
                    try {
                        Thread.sleep(millis);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted", e);
                    }
                    return List.of(inputs.getFirst().clone());
                }
            };
        }
    }

    private static final String WAITS = """
        import asyncio, time
        from dtorch._future import TensorFuture

        def outcome(action):
            start = time.monotonic()
            try:
                action()
                return "value"
            except TimeoutError as e:
                return "TimeoutError after %.1f s: %s" % (time.monotonic() - start, e)

        def waits(java_future):
            f = TensorFuture(java_future)
            async def awaited():
                await f
            return [outcome(f.get), outcome(lambda: asyncio.run(awaited()))]

        waits
        """;

    @Test
    void shouldGiveUpAtTheRuntimeTimeout() {
        try (DTorch runtime = DTorch.init(DTorchOptions.builder().devices(1).timeout(Duration.ofSeconds(1))
                 .shutdownTimeout(Duration.ofMillis(100)).build());
             PythonHost host = PythonHost.builder().bridge(new PyBridge(runtime)).build()) {
            DTensor slow = runtime.apply(new Stall(20_000), runtime.ones(new long[] {2}, runtime.mesh(0)));
            PyBridge bridge = new PyBridge(runtime);
            Value results = host.eval(WAITS).execute(bridge.getTensorAsync(slow));
            assertEquals(2, results.getArraySize());
            for (int i = 0; i < 2; i++) {
                String result = results.getArrayElement(i).asString();
                assertTrue(result.startsWith("TimeoutError after "), (i == 0 ? "get(): " : "await: ") + result);
                double seconds = Double.parseDouble(result.substring("TimeoutError after ".length(), result.indexOf(" s:")));
                assertTrue(seconds >= 0.9 && seconds < 10, "gave up at the runtime's 1 s, not the global 300 s: " + result);
                assertTrue(result.contains("timed out after 1 s"), result);
            }
        }
    }
}
