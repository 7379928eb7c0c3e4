package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.device.Nvtx;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.trace.StreamTimeline;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The trace on a CUDA mesh (ranks of one GPU, the same-device backend): every kernel and every collective of a worker
 * also has a device span, timed by events on its worker's stream, and every kernel and collective was an NVTX range
 * (docs/observability.md, "CUDA").
 */
@GpuTest
@Timeout(300)
class CudaTraceTest {
    private static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);
    /**
     * Slack, in microseconds, for a device span's end past the host end of the kernel that synchronized the stream:
     * {@code cudaEventElapsedTime} resolves about half a microsecond per interval, and a span's place adds up to two
     * intervals per kernel before it.
     */
    private static final BigDecimal MARGIN_MICROS = new BigDecimal(5);
    private static final BigDecimal MARGIN_MICROS_PER_KERNEL = BigDecimal.ONE;

    @TempDir
    Path dir;

    private static DTorchOptions.Builder cuda(int devices) {
        return DTorchOptions.builder().devices("cuda:" + devices).sameDevice(true);
    }

    /**
     * A few operators (factories, a matmul with a partial sum, a redistribution with its all-reduce, the values back),
     * then a sync, whose kernel ({@code sync}) synchronizes each device's stream before it ends: so the device span of
     * every kernel issued up to it ends before that kernel's host end. The trace is the whole run's ({@code trace(file)}),
     * so the runtime's close reports every pair still in flight.
     */
    @ParameterizedTest
    @ValueSource(ints = {1, 2})
    void shouldGiveEveryKernelADeviceSpanWithinItsHostTimes(int devices) throws Exception {
        Path file = dir.resolve("cuda-" + devices + ".json");
        long pushedBefore = Nvtx.rangesPushed();
        long poppedBefore = Nvtx.rangesPopped();
        try (DTorch dt = DTorch.init(cuda(devices).trace(file).build())) {
            TraceTest.runMatmulAndRedistribute(dt);
            TraceTest.runMatmulAndRedistribute(dt);
            DTensor x = dt.ones(new long[] {256, 256}, dt.defaultMesh(), Placement.replicate());
            x.add(x).relu().sum().toTorch().close();
            dt.sync();
        }
        List<JsonNode> events = new ArrayList<>();
        JSON.readTree(file.toFile()).get("traceEvents").forEach(events::add);
        List<JsonNode> kernels = spans(events, "kernel");
        List<JsonNode> deviceSpans = spans(events, "device").stream()
            .filter(d -> d.get("tid").asLong() < StreamTimeline.COLLECTIVE_TRACK_ID_BASE).toList();
        List<JsonNode> deviceCollectives = spans(events, "device").stream()
            .filter(d -> d.get("tid").asLong() >= StreamTimeline.COLLECTIVE_TRACK_ID_BASE).toList();
        List<JsonNode> collectives = spans(events, "collective");
        String context = " (trace " + file + ": " + kernels.size() + " kernels, " + deviceSpans.size() + " device spans)";

        assertEquals(kernels.size(), deviceSpans.size(), "one device span per kernel" + context);
        Map<String, JsonNode> byKernel = new HashMap<>();
        for (JsonNode d : deviceSpans) {
            String key = d.get("args").get("op").asLong() + "@" + d.get("args").get("device").asLong();
            assertTrue(byKernel.put(key, d) == null, "two device spans for kernel " + key + context);
            long device = d.get("args").get("device").asLong();
            assertEquals(device + 1, d.get("pid").asLong(), "device span in its device's row: " + d);
            assertEquals(StreamTimeline.TRACK_ID_BASE + device, d.get("tid").asLong(), "device span on the stream's track: " + d);
        }
        for (int device = 0; device < devices; device++) {
            int pid = device + 1;
            List<JsonNode> hostKernels = kernels.stream().filter(k -> k.get("pid").asInt() == pid).toList();
            JsonNode sync = hostKernels.stream().filter(k -> k.get("name").asText().equals("sync"))
                .max(Comparator.comparing(k -> k.get("ts").decimalValue()))
                .orElseThrow(() -> new AssertionError("no kernel of dt.sync() on device " + pid + context));
            BigDecimal synchronizedAt = end(sync);
            BigDecimal slack = MARGIN_MICROS.add(MARGIN_MICROS_PER_KERNEL.multiply(new BigDecimal(hostKernels.size())));
            for (JsonNode k : hostKernels) {
                String key = k.get("args").get("op").asLong() + "@" + k.get("args").get("device").asLong();
                JsonNode d = byKernel.get(key);
                assertTrue(d != null, "no device span for kernel " + k + context);
                String which = k.get("name").asText() + " #" + key + ": host " + k.get("ts") + " +" + k.get("dur")
                    + " us, device " + d.get("ts") + " +" + d.get("dur") + " us";
                assertTrue(d.get("dur").decimalValue().signum() >= 0, "negative device time of " + which);
                assertTrue(d.get("ts").decimalValue().compareTo(k.get("ts").decimalValue()) >= 0,
                    "device span starts before its kernel was issued: " + which);
                if (k.get("ts").decimalValue().compareTo(sync.get("ts").decimalValue()) <= 0) {
                    assertTrue(end(d).compareTo(synchronizedAt.add(slack)) <= 0, "device span ends after dt.sync()'s kernel "
                        + "synchronized the stream (host " + synchronizedAt + " us + " + slack + " us slack): " + which);
                }
                if (isComputing(k.get("name").asText())) {
                    assertTrue(d.get("dur").decimalValue().signum() > 0, "an operator that computes took no device time: " + which);
                }
            }
            List<JsonNode> track = deviceSpans.stream().filter(d -> d.get("pid").asInt() == pid)
                .sorted(Comparator.comparing(d -> d.get("ts").decimalValue())).toList();
            for (int i = 1; i < track.size(); i++) {
                assertTrue(track.get(i).get("ts").decimalValue().compareTo(end(track.get(i - 1))) >= 0,
                    "device spans overlap on one stream: " + track.get(i - 1) + " and " + track.get(i));
            }
        }

        // Collectives a worker ran on CUDA: a device span each, on the collectives' track of its row, after its host start.
        assertTrue(deviceCollectives.size() <= collectives.size(), deviceCollectives.size() + " device spans for "
            + collectives.size() + " collectives" + context);
        for (JsonNode d : deviceCollectives) {
            long device = d.get("args").get("device").asLong();
            assertEquals(StreamTimeline.COLLECTIVE_TRACK_ID_BASE + device, d.get("tid").asLong(), "collective's track: " + d);
            assertTrue(d.get("dur").decimalValue().signum() >= 0, "negative device time of collective " + d);
            assertTrue(collectives.stream().anyMatch(c -> c.get("pid").asLong() == device + 1 && c.get("name").equals(d.get("name"))
                    && c.get("ts").decimalValue().compareTo(d.get("ts").decimalValue()) <= 0),
                "no host collective " + d.get("name") + " on device " + device + " that starts before its device span " + d);
        }
        if (devices > 1) {
            for (int device = 0; device < devices; device++) {
                long row = device + 1;
                assertTrue(deviceCollectives.stream().anyMatch(d -> d.get("pid").asLong() == row),
                    "no device span of a collective on device " + device + " (host collectives: " + collectives + ")");
            }
        }

        long pushed = Nvtx.rangesPushed() - pushedBefore;
        // Every kernel here runs on CUDA, and so do the collectives of CUDA groups (a CPU group's would have no range).
        String nvtx = " (" + (Nvtx.available() ? "the NVTX library is loaded" : Nvtx.unavailableReason()) + ")";
        assertTrue(pushed >= kernels.size() && pushed <= kernels.size() + collectives.size(), pushed + " NVTX ranges for "
            + kernels.size() + " kernels and " + collectives.size() + " collectives: one per kernel and per CUDA collective" + nvtx);
        assertTrue(collectives.isEmpty() || pushed > kernels.size() || devices == 1, "no NVTX range for a collective" + nvtx);
        assertEquals(pushed, Nvtx.rangesPopped() - poppedBefore, "every NVTX range pushed was popped");
        System.out.println("CudaTraceTest: " + devices + " device(s), " + kernels.size() + " kernels, " + collectives.size()
            + " collectives; NVTX " + (Nvtx.available() ? "calls the library (" + Nvtx.nativeCalls() + " calls so far)"
            : "counts only: " + Nvtx.unavailableReason()));
    }

    /**
     * A float32 4096 x 4096 matmul is 137 GFLOP: at least about 2 ms on an H200 without TF32 (turned off here), against
     * tens of microseconds to launch it. A device span over 0.5 ms is device time, not the launch.
     */
    @Test
    void shouldTimeALargeMatmulOnTheDevice() throws Exception {
        boolean tf32 = torch.globalContext().allowTF32CuBLAS();
        torch.globalContext().setAllowTF32CuBLAS(false);
        try (DTorch dt = DTorch.init(cuda(1).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            DTensor a = dt.randn(1, new long[] {4096, 4096}, mesh, Placement.replicate());
            DTensor b = dt.randn(2, new long[] {4096, 4096}, mesh, Placement.replicate());
            a.matmul(b).sum().toTorch().close(); // warm-up: cuBLAS's handle and workspace, the allocator's blocks
            dt.profiler().start();
            DTensor c = a.matmul(b);
            dt.sync();
            dt.profiler().stop();
            Path file = dir.resolve("matmul.json");
            dt.profiler().export(file);
            c.close();

            List<JsonNode> events = new ArrayList<>();
            JSON.readTree(file.toFile()).get("traceEvents").forEach(events::add);
            JsonNode device = spans(events, "device").stream().filter(d -> d.get("name").asText().contains("matmul"))
                .findFirst().orElseThrow(() -> new AssertionError("no device span of the matmul in " + file));
            JsonNode host = spans(events, "kernel").stream().filter(k -> k.get("name").asText().contains("matmul"))
                .findFirst().orElseThrow();
            assertTrue(device.get("dur").decimalValue().compareTo(new BigDecimal(500)) > 0,
                "the 4096 x 4096 matmul took " + device.get("dur") + " us of device time (its host span: " + host.get("dur")
                    + " us); over 500 us expected");
            System.out.println("CudaTraceTest: matmul 4096 x 4096 float32: device " + device.get("dur") + " us, host (launch) "
                + host.get("dur") + " us");
        } finally {
            torch.globalContext().setAllowTF32CuBLAS(tf32);
        }
    }

    /** Operators of this test that launch device work (a view, a sync or a hand-off may launch none). */
    private static boolean isComputing(String name) {
        return name.contains("matmul") || name.equals("ones") || name.equals("full") || name.contains("add")
            || name.contains("relu");
    }

    private static BigDecimal end(JsonNode span) {
        return span.get("ts").decimalValue().add(span.get("dur").decimalValue());
    }

    private static List<JsonNode> spans(List<JsonNode> events, String category) {
        return events.stream().filter(e -> e.get("ph").asText().equals("X") && e.get("cat").asText().equals(category)).toList();
    }
}
