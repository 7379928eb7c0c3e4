package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.trace.Trace;
import org.dtorch.core.trace.Tracer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The timeline trace of a small tensor-parallel program in thread mode (docs/observability.md). */
@Timeout(60)
class TraceTest {
    private static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);

    @TempDir
    Path dir;

    /** A row-sharded [4, 8] of ones times a column-sharded [8, 6] of twos: a partial sum, all-reduced to every device. */
    static void runMatmulAndRedistribute(DTorch dt) {
        DeviceMesh mesh = dt.defaultMesh();
        DTensor a = dt.ones(new long[] {4, 8}, mesh, Placement.shard(1));
        DTensor b = dt.full(2.0, new long[] {8, 6}, mesh, Placement.shard(0));
        DTensor c = a.matmul(b).redistribute(Placement.replicate());
        try (Tensor value = c.toTorch(); Tensor expected = torch.full(new long[] {4, 6}, new org.bytedeco.pytorch.Scalar(16.0))) {
            assertTrue(torch.equal(value, expected), "matmul result " + TorchTensors.format(value, 100));
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {2, 4})
    void shouldTraceEveryKernelCollectiveAndFlowOfAProgram(int devices) throws Exception {
        Path file = dir.resolve("trace-" + devices + ".json");
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(devices).trace(file).build())) {
            runMatmulAndRedistribute(dt);
        }
        assertTraceOfMatmulAndRedistribute(file, devices);
    }

    /**
     * The trace of {@link #runMatmulAndRedistribute} on {@code devices} devices: rows named, a kernel on every device
     * for every operator, which starts after the operator was enqueued (one clock), the all-reduce's bytes, every
     * track well nested, and flows that pair up.
     */
    static void assertTraceOfMatmulAndRedistribute(Path file, int devices) throws Exception {
        JsonNode root = JSON.readTree(file.toFile());
        List<JsonNode> events = new ArrayList<>();
        root.get("traceEvents").forEach(events::add);

        Map<Integer, String> processNames = new HashMap<>();
        Set<String> namedThreads = new HashSet<>();
        for (JsonNode e : events) {
            if (e.get("ph").asText().equals("M") && e.get("name").asText().equals("process_name")) {
                processNames.put(e.get("pid").asInt(), e.get("args").get("name").asText());
            }
            if (e.get("ph").asText().equals("M") && e.get("name").asText().equals("thread_name")) {
                namedThreads.add(e.get("pid").asInt() + "/" + e.get("tid").asLong());
            }
        }
        assertEquals("host (client, controller)", processNames.get(Tracer.HOST_PID));
        for (int d = 0; d < devices; d++) {
            assertEquals("device cpu:" + d, processNames.get(d + 1));
        }
        for (JsonNode e : events) {
            if (!e.get("ph").asText().equals("M")) {
                assertTrue(namedThreads.contains(e.get("pid").asInt() + "/" + e.get("tid").asLong()), "unnamed track of " + e);
                assertTrue(e.get("ts").decimalValue().signum() >= 0, "negative timestamp in " + e);
            }
        }

        List<JsonNode> enqueues = spans(events, "client");
        List<JsonNode> kernels = spans(events, "kernel");
        assertTrue(enqueues.size() >= 4, "operators enqueued: " + enqueues.size());
        Set<Long> dispatched = new HashSet<>();
        spans(events, "controller").forEach(e -> dispatched.add(e.get("args").get("op").asLong()));
        int expectedKernels = 0;
        for (JsonNode enqueue : enqueues) {
            long op = enqueue.get("args").get("op").asLong();
            assertTrue(dispatched.contains(op), "operator " + op + " was not dispatched");
            for (JsonNode device : enqueue.get("args").get("devices")) {
                expectedKernels++;
                long d = device.asLong();
                List<JsonNode> found = kernels.stream().filter(k -> k.get("args").get("op").asLong() == op
                    && k.get("args").get("device").asLong() == d && k.get("pid").asLong() == d + 1).toList();
                assertEquals(1, found.size(), "kernels of " + enqueue.get("name").asText() + " #" + op + " on device " + d);
                assertTrue(found.getFirst().get("ts").decimalValue().compareTo(enqueue.get("ts").decimalValue()) > 0,
                    "the kernel of #" + op + " on device " + d + " starts before its enqueue: " + found.getFirst() + " " + enqueue);
            }
        }
        assertEquals(expectedKernels, kernels.size(), "every kernel belongs to an enqueued operator");

        // The one collective: the partial [4, 6] float32 sum all-reduced, 96 bytes from each rank (besides the barrier
        // that joins the group on its first use).
        List<JsonNode> collectives = spans(events, "collective").stream()
            .filter(c -> !c.get("args").get("kind").asText().equals("BARRIER")).toList();
        assertEquals(devices, collectives.size(), "collectives " + collectives);
        Set<Integer> collectiveRows = new HashSet<>();
        String group = java.util.stream.LongStream.range(0, devices).boxed().toList().toString();
        for (JsonNode c : collectives) {
            assertEquals("ALL_REDUCE", c.get("args").get("kind").asText());
            assertEquals("gloo", c.get("args").get("backend").asText().toLowerCase(java.util.Locale.ROOT).substring(0, 4));
            assertEquals(4 * 6 * 4, c.get("args").get("bytes").asLong());
            assertEquals(group, c.get("args").get("group").asText());
            collectiveRows.add(c.get("pid").asInt());
        }
        assertEquals(devices, collectiveRows.size(), "one all-reduce per device row");

        assertWellNested(events);
        assertFlowsPairUp(events, enqueues, kernels, expectedKernels);
    }

    @Test
    void shouldSumTimeCallsAndBytesPerOperatorAndCollective() {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(2).build())) {
            dt.profiler().start();
            runMatmulAndRedistribute(dt);
            dt.sync();
            Trace trace = dt.profiler().stop();
            Trace.Summary allReduce = trace.keyAverages().stream()
                .filter(s -> s.category().equals("collective") && s.name().equals("allReduce(sum)")).findFirst().orElseThrow();
            assertEquals(2, allReduce.calls());
            assertEquals(2 * 96, allReduce.bytes());
            Trace.Summary matmul = trace.keyAverages().stream()
                .filter(s -> s.category().equals("kernel") && s.name().contains("matmul")).findFirst().orElseThrow();
            assertEquals(2, matmul.calls());
            String table = dt.profiler().table();
            assertTrue(table.startsWith("Name"), table);
            assertTrue(table.lines().anyMatch(l -> l.startsWith("allReduce(sum)") && l.trim().endsWith("192")), table);
        }
    }

    @Test
    void shouldRecordNothingWhileOffAndRefuseASecondRecording() throws Exception {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(2).build())) {
            assertFalse(Tracer.enabled());
            runMatmulAndRedistribute(dt);
            dt.sync();
            assertThrows(IllegalStateException.class, () -> dt.profiler().stop());
            assertThrows(IllegalStateException.class, () -> dt.profiler().export(dir.resolve("none.json")));
            dt.profiler().start();
            IllegalStateException second = assertThrows(IllegalStateException.class,
                () -> DTorch.init(DTorchOptions.builder().devices(2).trace(dir.resolve("second.json")).build()));
            assertTrue(second.getMessage().contains("already being recorded"), second.getMessage());
            assertEquals(0, dt.profiler().stop().eventCount(), "events of the program run while off, or of the refused runtime");
            runMatmulAndRedistribute(dt); // still usable
        }
    }

    @Test
    void shouldCloseTheRuntimeAndNameThePathWhenTheTraceCannotBeWritten() {
        Path nowhere = dir.resolve("missing").resolve("trace.json");
        DTorch dt = DTorch.init(DTorchOptions.builder().devices(2).trace(nowhere).build());
        runMatmulAndRedistribute(dt);
        java.io.UncheckedIOException failed = assertThrows(java.io.UncheckedIOException.class, dt::close);
        assertTrue(failed.getMessage().contains(nowhere.toString()), failed.getMessage());
        assertFalse(Tracer.enabled(), "the recording was stopped");
        assertFalse(dt.runtime().graph().isOpen(), "the runtime was closed first");
        dt.close(); // idempotent: the trace is not written twice
    }

    private static List<JsonNode> spans(List<JsonNode> events, String category) {
        return events.stream().filter(e -> e.get("ph").asText().equals("X") && e.get("cat").asText().equals(category)).toList();
    }

    /** On every track, a complete event that starts inside another ends inside it. */
    private static void assertWellNested(List<JsonNode> events) {
        Map<String, List<JsonNode>> tracks = new HashMap<>();
        for (JsonNode e : events) {
            if (e.get("ph").asText().equals("X")) {
                tracks.computeIfAbsent(e.get("pid").asInt() + "/" + e.get("tid").asLong(), k -> new ArrayList<>()).add(e);
            }
        }
        for (Map.Entry<String, List<JsonNode>> track : tracks.entrySet()) {
            List<JsonNode> spans = new ArrayList<>(track.getValue());
            spans.sort(Comparator.<JsonNode, BigDecimal>comparing(e -> e.get("ts").decimalValue())
                .thenComparing(e -> e.get("dur").decimalValue(), Comparator.reverseOrder()));
            Deque<BigDecimal> open = new ArrayDeque<>();
            for (JsonNode e : spans) {
                BigDecimal start = e.get("ts").decimalValue();
                BigDecimal end = start.add(e.get("dur").decimalValue());
                while (!open.isEmpty() && open.peek().compareTo(start) <= 0) {
                    open.pop();
                }
                assertTrue(open.isEmpty() || end.compareTo(open.peek()) <= 0, "track " + track.getKey() + ": " + e + " overlaps its parent");
                open.push(end);
            }
        }
    }

    /** Every flow id has one start at an operator's enqueue and one finish at the start of one of its kernels. */
    private static void assertFlowsPairUp(List<JsonNode> events, List<JsonNode> enqueues, List<JsonNode> kernels, int expected) {
        Map<String, Long> enqueueAt = new HashMap<>();
        enqueues.forEach(e -> enqueueAt.put(at(e), e.get("args").get("op").asLong()));
        Map<String, Long> kernelAt = new HashMap<>();
        kernels.forEach(k -> kernelAt.put(at(k), k.get("args").get("op").asLong()));
        Map<Long, JsonNode> starts = new HashMap<>();
        Map<Long, JsonNode> finishes = new HashMap<>();
        for (JsonNode e : events) {
            String ph = e.get("ph").asText();
            if (ph.equals("s")) {
                assertEquals(null, starts.put(e.get("id").asLong(), e), "two flow starts with id " + e.get("id"));
            } else if (ph.equals("f")) {
                assertEquals("e", e.get("bp").asText());
                assertEquals(null, finishes.put(e.get("id").asLong(), e), "two flow finishes with id " + e.get("id"));
            }
        }
        assertEquals(expected, starts.size(), "one flow per kernel");
        assertEquals(starts.keySet(), finishes.keySet());
        for (Map.Entry<Long, JsonNode> s : starts.entrySet()) {
            Long from = enqueueAt.get(at(s.getValue()));
            Long to = kernelAt.get(at(finishes.get(s.getKey())));
            assertTrue(from != null && from.equals(to), "flow " + s.getKey() + " links operator " + from + " to " + to);
        }
    }

    private static String at(JsonNode e) {
        return e.get("pid").asInt() + "/" + e.get("tid").asLong() + "@" + e.get("ts").decimalValue().toPlainString();
    }
}
