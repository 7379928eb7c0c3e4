package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.trace.Tracer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trace of {@link TraceTest}'s program with a worker process per device: the workers' parts merged on one clock,
 * for the whole run and for a window of it.
 */
@Tag("multiprocess")
@Timeout(120)
class TraceInProcessesTest {
    private static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    @TempDir
    Path dir;

    private static DTorchOptions.Builder twoWorkers() {
        return DTorchOptions.builder().devices(2).perDevicePerProcess(true).timeout(TIMEOUT);
    }

    @Test
    void shouldMergeTheWorkersTracesOnTheControllersClock() throws Exception {
        Path file = dir.resolve("trace.json");
        String instance;
        try (DTorch dt = DTorch.init(twoWorkers().trace(file).build())) {
            instance = dt.runtime().instanceId();
            TraceTest.runMatmulAndRedistribute(dt);
        }
        TraceTest.assertTraceOfMatmulAndRedistribute(file, 2);
        // This runtime's parts only: another test JVM may be tracing a runtime of its own at the same time.
        try (var left = Files.list(org.dtorch.core.shm.SharedRegion.directory())) {
            assertEquals(List.of(), left.map(p -> p.getFileName().toString()).filter(n -> n.contains(instance) && n.contains("-trace-")).toList(),
                "trace parts left behind");
        }
    }

    /**
     * A window opened after the start and closed before the close has the kernels of the operators issued inside it
     * on every device, none of those before or after it, and the control frames on both sides. A worker that dies
     * inside the next window fails that window's stop, naming it, within the timeout, and the runtime still closes.
     * (One runtime for both, to keep the workers' start out of the second.)
     */
    @Test
    void shouldRecordTheWorkersInAWindowAndNameAWorkerKilledInTheNext() throws Exception {
        Path file = dir.resolve("window.json");
        DTorch dt = DTorch.init(twoWorkers().build());
        try {
            TraceTest.runMatmulAndRedistribute(dt); // before the window
            dt.sync();
            dt.profiler().start();
            TraceTest.runMatmulAndRedistribute(dt);
            dt.sync();
            dt.runtime().liveBlobCount(); // waits for the workers' DONE reports, so the window has them at both ends
            dt.profiler().stop();
            dt.ones(new long[] {4, 4}, dt.defaultMesh(), Placement.shard(0)); // after it
            dt.sync();
            dt.profiler().export(file);

            dt.profiler().start();
            long pid = dt.runtime().workerPids().get(1L);
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();
            long started = System.nanoTime();
            IllegalStateException failed = assertThrows(IllegalStateException.class, () -> dt.profiler().stop());
            assertTrue(System.nanoTime() - started < TIMEOUT.toNanos(), "stop() took longer than the runtime's timeout");
            assertTrue(failed.getMessage().contains("cpu:1's worker (pid " + pid + ") exited with status"), failed.getMessage());
            assertFalse(Tracer.enabled(), "the recording is over");
        } finally {
            dt.close();
        }
        dt.profiler().start(); // the tracer records again
        assertEquals(0, dt.profiler().stop().eventCount());
        TraceTest.assertTraceOfMatmulAndRedistribute(file, 2);
        assertControlFramesPairUp(file, 2);
    }

    /**
     * Every {@code OPERATOR} frame the controller sent to a worker in the window was received by that worker, later on
     * the shared clock, with the same number, and nothing else was; every {@code DONE} seen at both ends was sent before
     * it was received. Controller-side events are on the host row, the workers' on their device rows.
     */
    private static void assertControlFramesPairUp(Path file, int devices) throws Exception {
        List<JsonNode> control = new ArrayList<>();
        JSON.readTree(file.toFile()).get("traceEvents").forEach(e -> {
            if (e.has("cat") && e.get("cat").asText().equals("control")) {
                control.add(e);
            }
        });
        for (int d = 0; d < devices; d++) {
            String worker = "the worker of cpu:" + d;
            Map<Long, JsonNode> operatorsSent = numbered(control, Tracer.HOST_PID, "OPERATOR sent", worker);
            Map<Long, JsonNode> operatorsReceived = numbered(control, d + 1, "OPERATOR received", "the controller");
            assertTrue(operatorsSent.size() >= 5, "operators sent to cpu:" + d + ": " + operatorsSent.keySet());
            assertEquals(operatorsSent.keySet(), operatorsReceived.keySet(), "operator frames of cpu:" + d);
            operatorsSent.forEach((seq, sent) -> assertLater(sent, operatorsReceived.get(seq)));
            Map<Long, JsonNode> donesSent = numbered(control, d + 1, "DONE sent", "the controller");
            Map<Long, JsonNode> donesReceived = numbered(control, Tracer.HOST_PID, "DONE received", worker);
            assertFalse(donesSent.isEmpty() || donesReceived.isEmpty(), "DONE frames of cpu:" + d);
            donesReceived.forEach((seq, received) -> {
                if (donesSent.containsKey(seq)) {
                    assertLater(donesSent.get(seq), received);
                }
            });
        }
    }

    /** The control events named {@code name} on row {@code pid} with {@code peer}, by frame number; numbers unique. */
    private static Map<Long, JsonNode> numbered(List<JsonNode> control, int pid, String name, String peer) {
        Map<Long, JsonNode> out = new HashMap<>();
        for (JsonNode e : control) {
            if (e.get("pid").asInt() == pid && e.get("name").asText().equals(name) && e.get("args").get("peer").asText().equals(peer)) {
                assertEquals(null, out.put(e.get("args").get("seq").asLong(), e), "two events of one frame: " + e);
                assertEquals("i", e.get("ph").asText());
                assertTrue(e.get("args").get("bytes").asLong() > 0, "a frame's bytes: " + e);
            }
        }
        return out;
    }

    private static void assertLater(JsonNode sent, JsonNode received) {
        assertTrue(received.get("ts").decimalValue().compareTo(sent.get("ts").decimalValue()) > 0,
            "received before it was sent: " + sent + " then " + received);
    }
}
