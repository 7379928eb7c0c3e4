package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A check of a real trace: {@code ./dtorch run --trace FILE examples/python/quickstart.py} in thread mode and
 * with a worker process per device. The file parses as JSON; every operator enqueued has its kernel on every one of its
 * devices, starting after the enqueue (worker processes' times on the controller's clock); the all-reduces carry the
 * bytes their shapes imply; every track is well nested.
 */
@Timeout(300)
class TraceOfQuickstartTest {
    private static final Path SCRIPT = Path.of("").toAbsolutePath().getParent().resolve("examples/python/quickstart.py");
    private static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);

    @TempDir
    Path dir;

    @Test
    void shouldTraceTheQuickstartInThreads() throws Exception {
        assertTraceOfQuickstart(launch());
    }

    /**
     * Tagged {@code slow}: every build traces the quickstart in threads (above) and a program's worker processes on one
     * clock ({@code TraceInProcessesTest}).
     */
    @Test
    @Tag("multiprocess")
    @Tag("slow")
    void shouldTraceTheQuickstartInWorkerProcessesOnOneClock() throws Exception {
        assertTraceOfQuickstart(launch("--per-device-process"));
    }

    private Path launch(String... mode) {
        Path trace = dir.resolve("trace.json");
        List<String> args = new ArrayList<>(List.of("run", "--trace", trace.toString()));
        args.addAll(List.of(mode));
        args.add(SCRIPT.toString());
        assertEquals(0, ScriptBytecode.launch(args.toArray(String[]::new)), "the quickstart failed");
        return trace;
    }

    private static void assertTraceOfQuickstart(Path file) throws Exception {
        List<JsonNode> events = new ArrayList<>();
        JSON.readTree(file.toFile()).get("traceEvents").forEach(events::add);
        Map<Long, JsonNode> kernels = new HashMap<>();  // by operator id * 4096 + device
        for (JsonNode e : spans(events, "kernel")) {
            long device = e.get("args").get("device").asLong();
            assertEquals(device + 1, e.get("pid").asLong(), "the kernel's row: " + e);
            kernels.put(e.get("args").get("op").asLong() * 4096 + device, e);
        }
        List<JsonNode> enqueues = spans(events, "client");
        assertTrue(enqueues.size() >= 20, "operators enqueued: " + enqueues.size());
        for (JsonNode enqueue : enqueues) {
            for (JsonNode device : enqueue.get("args").get("devices")) {
                JsonNode kernel = kernels.get(enqueue.get("args").get("op").asLong() * 4096 + device.asLong());
                String what = enqueue.get("name").asText() + " " + enqueue.get("args") + " on device " + device;
                assertTrue(kernel != null, "no kernel of " + what);
                assertEquals(enqueue.get("name").asText(), kernel.get("name").asText(), what);
                assertTrue(kernel.get("ts").decimalValue().compareTo(enqueue.get("ts").decimalValue()) > 0,
                    "the kernel of " + what + " starts before its enqueue: " + kernel);
            }
        }
        Map<String, List<Long>> bytes = new TreeMap<>();
        for (JsonNode c : spans(events, "collective")) {
            bytes.computeIfAbsent(c.get("name").asText() + " " + c.get("args").get("group").asText(), k -> new ArrayList<>())
                .add(c.get("args").get("bytes").asLong());
        }
        bytes.values().forEach(list -> list.sort(null));
        // On the 2 x 2 mesh (dp: groups [0, 2] and [1, 3]; tp: [0, 1] and [2, 3]), float32: each rank's [4, 16] of y and
        // of y2 summed over tp (256 bytes, twice), its [16, 32] of w2's gradient summed over dp (2048 bytes), and the two
        // losses, partial scalars over dp, summed when they are read (4 bytes, twice); a barrier as each group starts. The
        // gradient's sum runs in the background of the backward: its wait, where the optimizer reads it, is a span too.
        List<Long> tp = List.of(256L, 256L, 256L, 256L);
        List<Long> dp = List.of(4L, 4L, 4L, 4L, 2048L, 2048L);
        List<Long> twice = List.of(0L, 0L);
        assertEquals(Map.of("allReduce(sum) [0, 1]", tp, "allReduce(sum) [2, 3]", tp, "allReduce(sum) [0, 2]", dp,
            "allReduce(sum) [1, 3]", dp, "barrier [0, 1]", twice, "barrier [2, 3]", twice, "barrier [0, 2]", twice,
            "barrier [1, 3]", twice, "wait allReduce(sum) [0, 2]", twice, "wait allReduce(sum) [1, 3]", twice), bytes,
            "collectives: bytes per name and group");
        assertWellNested(events);
    }

    private static List<JsonNode> spans(List<JsonNode> events, String category) {
        return events.stream().filter(e -> e.get("ph").asText().equals("X") && e.get("cat").asText().equals(category)).toList();
    }

    /** Per track (pid, tid), in order of start, every complete event ends before any enclosing one does. */
    private static void assertWellNested(List<JsonNode> events) {
        Map<String, List<JsonNode>> byTrack = new HashMap<>();
        events.stream().filter(e -> e.get("ph").asText().equals("X"))
            .forEach(e -> byTrack.computeIfAbsent(e.get("pid") + "/" + e.get("tid"), k -> new ArrayList<>()).add(e));
        byTrack.forEach((track, list) -> {
            list.sort(Comparator.comparing((JsonNode e) -> e.get("ts").decimalValue()).thenComparing(e -> e.get("dur").decimalValue(),
                Comparator.reverseOrder()));
            Deque<BigDecimal> enclosingEnds = new ArrayDeque<>();
            for (JsonNode e : list) {
                BigDecimal start = e.get("ts").decimalValue();
                enclosingEnds.removeIf(end -> end.compareTo(start) <= 0);
                BigDecimal end = start.add(e.get("dur").decimalValue());
                assertTrue(enclosingEnds.stream().allMatch(outer -> end.compareTo(outer) <= 0),
                    "track " + track + ": " + e + " crosses the end of an enclosing span");
                enclosingEnds.push(end);
            }
        });
    }
}
