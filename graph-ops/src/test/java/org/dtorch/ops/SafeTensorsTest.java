package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.api.SafeTensors;
import org.dtorch.api.SafeTensors.Layout;
import org.dtorch.core.device.Device;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.memory.ProcessMemory;
import org.dtorch.core.runtime.MemoryStats;
import org.dtorch.core.safetensors.SafeTensorsDtype;
import org.dtorch.core.safetensors.SafeTensorsException;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * State dicts in safetensors files on four CPU devices in threads ({@link SafeTensorsInProcessesTest}: worker
 * processes): round trips of every dtype between meshes of 1, 4 and 2 x 2 devices with uneven and empty shards, checked
 * against the host tensors they came from; files read back by an independent reader written here and files written
 * here by hand read by the loader; every refusal before anything runs; sharded checkpoints; and the peak memory of a
 * load, from the runtime's memory statistics.
 */
@Timeout(180)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SafeTensorsTest {
    DTorch dt;
    DeviceMesh grid;
    DeviceMesh line;
    DeviceMesh one;
    @TempDir
    Path dir;

    boolean processes() {
        return false;
    }

    @BeforeAll
    void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(processes()).timeout(Duration.ofSeconds(60)).build());
        grid = dt.initDeviceMesh(new int[] {2, 2}, "dp", "tp");
        line = dt.defaultMesh();
        one = dt.mesh(0);
    }

    @AfterAll
    void stop() {
        dt.close();
    }

    /** Host values of {@code dtype} and {@code shape}, distinct per element (bools alternate in a pattern). */
    static Tensor values(SafeTensorsDtype dtype, long... shape) {
        long n = 1;
        for (long s : shape) {
            n *= s;
        }
        try (TensorOptions longs = TorchTensors.options(ScalarType.Long, Device.cpu(0));
             Scalar count = new Scalar(n); Tensor flat = torch.arange(count, longs); Tensor shaped = flat.reshape(shape)) {
            return switch (dtype) {
                case F32, F16, BF16 -> {
                    try (Scalar third = new Scalar(0.37); Tensor scaled = shaped.mul(third); Scalar one = new Scalar(-1.5);
                         Tensor shifted = scaled.add(one)) {
                        yield shifted.to(dtype.torch());
                    }
                }
                case I64, I32 -> {
                    try (Scalar k = new Scalar(-7919L); Tensor scaled = shaped.mul(k)) {
                        yield scaled.to(dtype.torch());
                    }
                }
                case U8 -> {
                    try (Scalar m = new Scalar(256L); Tensor wrapped = shaped.remainder(m)) {
                        yield wrapped.to(dtype.torch());
                    }
                }
                case BOOL -> {
                    try (Scalar three = new Scalar(3L); Tensor r = shaped.remainder(three); Scalar zero = new Scalar(0L)) {
                        yield r.eq(zero);
                    }
                }
            };
        }
    }

    private static void assertSameValues(Tensor expected, DTensor actual, String what) {
        try (Tensor value = actual.runtime().getTensorAsync(actual).get()) {
            assertEquals(TorchTensors.dtype(expected), TorchTensors.dtype(value), what);
            assertArrayEquals(TorchTensors.shape(expected), TorchTensors.shape(value), what);
            assertTrue(value.equal(expected), what + ": values differ");
        }
    }

    private Map<String, Tensor> everyDtype(long... shape) {
        Map<String, Tensor> host = new LinkedHashMap<>();
        for (SafeTensorsDtype d : SafeTensorsDtype.values()) {
            host.put("layer." + d.name().toLowerCase(java.util.Locale.ROOT), values(d, shape));
        }
        return host;
    }

    private static void closeAll(Map<String, ?> tensors) {
        for (Object t : tensors.values()) {
            if (t instanceof Tensor h) {
                h.close();
            } else {
                ((DTensor) t).close();
            }
        }
    }

    @Test
    void shouldRoundTripEveryDtypeFromA2x2MeshToFourDevicesAndToOne() {
        Map<String, Tensor> host = everyDtype(5, 3);
        Map<String, DTensor> saved = new LinkedHashMap<>();
        host.forEach((k, v) -> saved.put(k, dt.tensor(v, grid, Placement.shard(0), Placement.shard(1))));
        Path file = dir.resolve("every-dtype.safetensors");
        SafeTensors.save(dt, file, saved, Map.of("format", "pt"));
        List<Layout> targets = List.of(Layout.of(grid, Placement.shard(1), Placement.shard(0)), Layout.of(line, Placement.shard(0)),
            Layout.of(line, Placement.shard(1)), Layout.of(line, Placement.replicate()), Layout.of(grid, Placement.replicate(), Placement.shard(0)),
            Layout.of(one, Placement.replicate()));
        for (Layout target : targets) {
            Map<String, Layout> layouts = new LinkedHashMap<>();
            host.keySet().forEach(k -> layouts.put(k, target));
            Map<String, DTensor> loaded = SafeTensors.load(dt, file, layouts, true);
            for (Map.Entry<String, Tensor> e : host.entrySet()) {
                DTensor t = loaded.get(e.getKey());
                assertEquals(target.placements(), t.placements());
                assertTrue(t.mesh().sameDevicesAs(target.mesh()));
                assertSameValues(e.getValue(), t, e.getKey() + " onto " + target);
            }
            closeAll(loaded);
        }
        closeAll(saved);
        closeAll(host);
    }

    @Test
    void shouldGiveEachDeviceItsBalancedShardEmptyOnesIncluded() {
        try (Tensor rows = values(SafeTensorsDtype.F32, 2, 3); Tensor none = values(SafeTensorsDtype.I64, 0, 4);
             DTensor rowsOnOne = dt.tensor(rows, one); DTensor noneOnOne = dt.tensor(none, one)) {
            Path file = dir.resolve("uneven.safetensors");
            SafeTensors.save(dt, file, Map.of("rows", rowsOnOne, "none", noneOnOne));
            Map<String, DTensor> loaded = SafeTensors.load(dt, file, Map.of("rows", Layout.of(line, Placement.shard(0)),
                "none", Layout.of(line, Placement.shard(1))), true);
            List<Tensor> locals = loaded.get("rows").toLocal();
            ShardLayout layout = ShardLayout.of(new long[] {2, 3}, new Sharding(line, List.of(Placement.shard(0))));
            for (int d = 0; d < 4; d++) {
                assertArrayEquals(new long[] {d < 2 ? 1 : 0, 3}, TorchTensors.shape(locals.get(d)), "2 rows over 4 are 1, 1, 0, 0");
                try (Tensor expected = layout.localSlice(rows, d)) {
                    assertTrue(locals.get(d).equal(expected), "device " + d);
                }
            }
            locals.forEach(Tensor::close);
            assertSameValues(none, loaded.get("none"), "a tensor of no elements, S(1) over 4 devices");
            // Saved again from the empty shards, and read back on one device.
            Path again = dir.resolve("uneven-again.safetensors");
            SafeTensors.save(dt, again, loaded);
            Map<String, DTensor> back = SafeTensors.load(dt, again, Map.of("rows", Layout.of(one, Placement.replicate()),
                "none", Layout.of(one, Placement.replicate())), true);
            assertSameValues(rows, back.get("rows"), "rows saved from 1, 1, 0, 0 shards");
            assertSameValues(none, back.get("none"), "none saved from empty shards");
            closeAll(loaded);
            closeAll(back);
        }
    }

    @Test
    void shouldWriteBytesThatAnIndependentReaderReadsBack() throws IOException {
        Map<String, Tensor> host = everyDtype(3, 4);
        Map<String, DTensor> saved = new LinkedHashMap<>();
        host.forEach((k, v) -> saved.put(k, dt.tensor(v, line, Placement.shard(1))));
        Path file = dir.resolve("independent.safetensors");
        SafeTensors.save(dt, file, saved, Map.of("step", "12"));
        // The reader: ByteBuffer for the framing, Jackson for the JSON, raw bytes compared with the host tensors' memory.
        ByteBuffer all = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
        long n = all.getLong(0);
        JsonNode header = new ObjectMapper().readTree(new String(all.array(), 8, (int) n, StandardCharsets.UTF_8));
        assertEquals("12", header.get("__metadata__").get("step").asText());
        for (Map.Entry<String, Tensor> e : host.entrySet()) {
            JsonNode entry = header.get(e.getKey());
            String dtype = SafeTensorsDtype.of(TorchTensors.dtype(e.getValue())).name();
            assertEquals(dtype, entry.get("dtype").asText());
            assertEquals("[3,4]", entry.get("shape").toString());
            int begin = entry.get("data_offsets").get(0).asInt();
            int end = entry.get("data_offsets").get(1).asInt();
            byte[] inFile = new byte[end - begin];
            all.get((int) (8 + n + begin), inFile);
            assertArrayEquals(rawBytes(e.getValue()), inFile, e.getKey());
        }
        closeAll(saved);
        closeAll(host);
    }

    /** The bytes of a host tensor's memory, row-major. */
    static byte[] rawBytes(Tensor t) {
        try (Tensor c = t.contiguous()) {
            byte[] out = new byte[(int) (c.numel() * c.element_size())];
            if (out.length > 0) {
                new BytePointer(c.data_ptr()).capacity(out.length).get(out);
            }
            return out;
        }
    }

    @Test
    void shouldLoadAFileWrittenByHand() throws IOException {
        String json = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,5],\"data_offsets\":[0,40]},\"i\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[40,64]}}";
        byte[] header = json.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + header.length + 64).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(header.length).put(header);
        for (int i = 0; i < 10; i++) {
            b.putFloat(i * 0.5f);
        }
        b.putLong(-1).putLong(Long.MAX_VALUE).putLong(42);
        Path file = dir.resolve("by-hand.safetensors");
        Files.write(file, b.array());
        Map<String, DTensor> loaded = SafeTensors.load(dt, file, Map.of("w", Layout.of(grid, Placement.shard(1), Placement.shard(1)),
            "i", Layout.of(line, Placement.shard(0))), true);
        try (Tensor w = values(SafeTensorsDtype.F32, 2, 5); Scalar half = new Scalar(0.5); Tensor expectedW = torch.arange(new Scalar(10L),
                 TorchTensors.options(ScalarType.Float, Device.cpu(0))).mul(half).reshape(2, 5)) {
            assertSameValues(expectedW, loaded.get("w"), "w, S(1) twice over a 2 x 2 mesh");
        }
        try (Tensor i = loaded.get("i").runtime().getTensorAsync(loaded.get("i")).get()) {
            assertEquals(List.of(-1L, Long.MAX_VALUE, 42L), List.of(i.get(0).item_long(), i.get(1).item_long(), i.get(2).item_long()));
        }
        closeAll(loaded);
    }

    @Test
    void shouldRefuseMismatchesBeforeReadingAnything() {
        Path file = dir.resolve("small.safetensors");
        try (Tensor a = values(SafeTensorsDtype.F32, 4, 2); Tensor b = values(SafeTensorsDtype.I32, 3);
             DTensor da = dt.tensor(a, line, Placement.shard(0)); DTensor db = dt.tensor(b, line)) {
            SafeTensors.save(dt, file, Map.of("a", da, "b", db));
        }
        Layout rows = Layout.of(line, Placement.shard(0));
        assertRefused(() -> SafeTensors.load(dt, file, Map.of("a", rows, "b", rows, "c", rows), true), file, "missing [c]");
        assertRefused(() -> SafeTensors.load(dt, file, Map.of("a", rows), true), file, "unexpected [b]");
        SafeTensors.Loaded partial = SafeTensors.loadWithReport(dt, List.of(file), Map.of("a", rows, "c", rows), false);
        assertEquals(List.of("c"), partial.missing());
        assertEquals(List.of("b"), partial.unexpected());
        assertEquals(List.of("a"), List.copyOf(partial.tensors().keySet()));
        partial.close();
        assertRefused(() -> SafeTensors.load(dt, file, Map.of("a", rows.withShape(2, 4), "b", rows), true), file,
            "tensor 'a'", "has shape [4, 2] in the file, but the target's is [2, 4]");
        assertRefused(() -> SafeTensors.load(dt, file, Map.of("a", Layout.of(line, Placement.partial()), "b", rows), true), file,
            "tensor 'a'", "not loadable");
        assertRefused(() -> SafeTensors.load(dt, file, Map.of("a", rows, "b", Layout.of(line, Placement.shard(1))), true), file,
            "tensor 'b'", "out of range");
        assertRefused(() -> SafeTensors.load(dt, file, Map.of("a", Layout.of(grid, Placement.shard(0)), "b", rows), true), file,
            "tensor 'a'", "1 placements for a mesh of 2 dimensions");
        try (Tensor d = torch.zeros(2).to(ScalarType.Double); DTensor dd = dt.tensor(d, line)) {
            Path refused = dir.resolve("f64.safetensors");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SafeTensors.save(dt, refused, Map.of("d", dd)));
            assertTrue(e.getMessage().contains("tensor 'd'") && e.getMessage().contains("float64"), e.getMessage());
            assertFalse(Files.exists(refused), "nothing is written");
        }
        // The runtime is still usable.
        assertEquals(2, SafeTensors.load(dt, file, Map.of("a", rows, "b", rows), true).size());
    }

    private static void assertRefused(Runnable call, Path file, String... fragments) {
        SafeTensorsException e = assertThrows(SafeTensorsException.class, call::run);
        assertTrue(e.getMessage().startsWith(file.toString()), e.getMessage());
        for (String f : fragments) {
            assertTrue(e.getMessage().contains(f), "expected '" + f + "' in: " + e.getMessage());
        }
    }

    @Test
    void shouldSaveAShardedCheckpointAndLoadItThroughItsIndex() throws IOException {
        Map<String, Tensor> host = new LinkedHashMap<>();
        for (int i = 0; i < 5; i++) {
            host.put("block." + i + ".weight", values(SafeTensorsDtype.BF16, 8, 6));
        }
        Map<String, DTensor> saved = new LinkedHashMap<>();
        host.forEach((k, v) -> saved.put(k, dt.tensor(v, grid, Placement.shard(0), Placement.replicate())));
        Path index = SafeTensors.saveSharded(dt, dir.resolve("sharded"), saved, Map.of("format", "pt"), 200);
        try (Stream<Path> files = Files.list(index.getParent())) {
            assertEquals(List.of("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                "model.safetensors.index.json"), files.map(p -> p.getFileName().toString()).sorted().toList(), "96 bytes a tensor, 200 a file");
        }
        JsonNode weightMap = new ObjectMapper().readTree(index.toFile()).get("weight_map");
        assertEquals("model-00003-of-00003.safetensors", weightMap.get("block.4.weight").asText());
        SafeTensors.Loaded loaded = SafeTensors.loadWithReport(dt, List.of(index), name -> Layout.of(line, Placement.shard(1)), null, true);
        host.forEach((k, v) -> assertSameValues(v, loaded.tensors().get(k), k));
        loaded.close();
        closeAll(saved);
        closeAll(host);
    }

    @Test
    void shouldSaveAPartialTensorAsItsSum() {
        List<Tensor> locals = new ArrayList<>();
        for (int d = 0; d < 4; d++) {
            locals.add(values(SafeTensorsDtype.F32, 3, 2));
        }
        DTensor partial = dt.fromLocal(locals, line, Placement.partial());
        Path file = dir.resolve("partial.safetensors");
        SafeTensors.save(dt, file, Map.of("p", partial));
        try (Scalar four = new Scalar(4.0); Tensor expected = locals.getFirst().mul(four)) {
            Map<String, DTensor> loaded = SafeTensors.load(dt, file, Map.of("p", Layout.of(one, Placement.replicate())), true);
            assertSameValues(expected, loaded.get("p"), "the sum of four partial values");
            closeAll(loaded);
        }
        partial.close();
        locals.forEach(Tensor::close);
    }

    @Test
    void shouldHoldNoMoreThanEachDevicesShardsAndOneWindowPerDeviceWhileLoading() {
        // A model of 8 row-sharded matrices of 64 KiB and a replicated bias: 4 devices hold a quarter of each matrix.
        Map<String, DTensor> model = new LinkedHashMap<>();
        Map<String, Layout> layouts = new LinkedHashMap<>();
        long modelBytes = 0;
        for (int i = 0; i < 8; i++) {
            model.put("w" + i, dt.full(i, new long[] {64, 256}, line, Placement.shard(0)));
            layouts.put("w" + i, Layout.of(line, Placement.shard(0)));
            modelBytes += 64 * 256 * 4;
        }
        model.put("bias", dt.full(1.0, new long[] {256}, line));
        layouts.put("bias", Layout.of(line, Placement.replicate()));
        modelBytes += 256 * 4;
        Path file = dir.resolve("model.safetensors");
        SafeTensors.save(dt, file, model);
        closeAll(model);

        long[] before = new long[4];
        for (int d = 0; d < 4; d++) {
            SettledMemory.liveBytes(dt, d);  // what earlier tests dropped is freed now, not in the middle of the load
            before[d] = dt.resetPeakMemoryStats(d).blobLiveBytes();
        }
        long controllerBefore = ProcessMemory.FILE_MAPPINGS.live();
        ProcessMemory.FILE_MAPPINGS.resetPeak();
        Map<String, DTensor> loaded = SafeTensors.load(dt, file, layouts, true);
        // Every device done: in threads the mapping gauge is the process's, so one device's statistics show the
        // windows the others still have mapped until they finish.
        dt.sync();
        long ownShards = 8 * 16 * 256 * 4 + 256 * 4;      // per device: 16 rows of each matrix and the whole bias
        long largestMapping = 16 * 256 * 4;                // one matrix's shard: the largest range a device maps at once
        for (int d = 0; d < 4; d++) {
            MemoryStats stats = dt.memoryStats(d);
            assertEquals(before[d] + ownShards, stats.blobPeakBytes(), "device " + d + " holds its own shards, nothing more: " + stats);
            if (processes()) {
                assertEquals(largestMapping, stats.fileMappedPeakBytes(), "device " + d + "'s worker mapped one shard at a time: " + stats);
            } else {
                assertTrue(stats.fileMappedPeakBytes() <= 4 * largestMapping, "the four device threads map a shard each at most: " + stats);
            }
            assertEquals(0, stats.fileMappedLiveBytes(), "every mapping is released");
            assertTrue(ownShards + largestMapping < modelBytes / 3, "the bound is far below the model");
        }
        if (processes()) {
            assertEquals(controllerBefore, ProcessMemory.FILE_MAPPINGS.peak(), "the controller mapped none of the file");
        }
        closeAll(loaded);
    }
}
