package org.dtorch.core.safetensors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.dtorch.core.device.Cuda;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every kind of bad safetensors file, each refused with one message that names the file and, where one is at fault,
 * the tensor; and the headers our writer makes, read back.
 */
class SafeTensorsHeaderTest {
    @TempDir
    Path dir;

    @BeforeAll
    static void loadNatives() {
        Cuda.loadNatives();
    }

    /** A file of a header length, header text and {@code dataBytes} zero bytes of data, written by hand. */
    private Path file(String name, long headerLength, String header, int dataBytes) throws IOException {
        byte[] json = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + json.length + dataBytes).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(headerLength).put(json);
        Path p = dir.resolve(name);
        Files.write(p, b.array());
        return p;
    }

    private Path file(String name, String header, int dataBytes) throws IOException {
        return file(name, header.getBytes(StandardCharsets.UTF_8).length, header, dataBytes);
    }

    private static void refused(Path file, String... fragments) {
        SafeTensorsException e = assertThrows(SafeTensorsException.class, () -> SafeTensorsHeader.read(file));
        assertTrue(e.getMessage().startsWith(file.toString()), e.getMessage());
        for (String f : fragments) {
            assertTrue(e.getMessage().contains(f), "expected '" + f + "' in: " + e.getMessage());
        }
    }

    @Test
    void shouldReadAValidHeaderWithMetadata() throws IOException {
        Path p = file("ok.safetensors", "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            + "\"b\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[24,25]},\"e\":{\"dtype\":\"I64\",\"shape\":[0,4],\"data_offsets\":[25,25]}}", 25);
        SafeTensorsHeader h = SafeTensorsHeader.read(p);
        assertEquals(Map.of("format", "pt"), h.metadata());
        assertEquals(List.of("w", "b", "e"), List.copyOf(h.tensors().keySet()));
        assertEquals(new TensorEntry("w", SafeTensorsDtype.F32, new long[] {2, 3}, 0, 24), h.tensor("w"));
        assertEquals(Files.size(p) - 25, h.dataStart());
    }

    @Test
    void shouldRefuseATruncatedFile() throws IOException {
        Path p = dir.resolve("short.safetensors");
        Files.write(p, new byte[] {1, 2, 3});
        refused(p, "truncated", "3 bytes");
    }

    @Test
    void shouldRefuseAHeaderLengthBeyondTheFile() throws IOException {
        refused(file("long.safetensors", 1000, "{}", 0), "header length 1000 runs past the end of the file");
        refused(file("negative.safetensors", -1, "{}", 0), "header length 18446744073709551615");
    }

    @Test
    void shouldRefuseAHeaderThatIsNotJson() throws IOException {
        refused(file("notjson.safetensors", "{\"w\": [1, 2", 0), "header is not JSON");
        refused(file("array.safetensors", "[1, 2]", 0), "header is not a JSON object");
        Path latin1 = dir.resolve("latin1.safetensors");
        ByteBuffer b = ByteBuffer.allocate(8 + 4).order(ByteOrder.LITTLE_ENDIAN).putLong(4).put(new byte[] {'"', (byte) 0xe9, '"', ' '});
        Files.write(latin1, b.array());
        refused(latin1, "header is not UTF-8");
    }

    @Test
    void shouldRefuseOffsetsOutOfRangeNamingTheTensor() throws IOException {
        refused(file("past.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8),
            "tensor 'w'", "run past the end of the data (8 bytes", "truncated");
        refused(file("order.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8), "tensor 'w'", "not in order");
    }

    @Test
    void shouldRefuseOverlappingTensors() throws IOException {
        refused(file("overlap.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
            + "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16), "tensor 'b'", "overlap those of 'a' [0, 16]");
    }

    @Test
    void shouldRefuseAnUnknownDtypeByName() throws IOException {
        refused(file("f64.safetensors", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8),
            "tensor 'w'", "dtype F64 is not supported", "F32, F16, BF16, I64, I32, U8, BOOL");
    }

    @Test
    void shouldRefuseAShapeThatDisagreesWithTheByteCount() throws IOException {
        refused(file("count.safetensors", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,10]}}", 10),
            "tensor 'w'", "shape [2, 3] of BF16 needs 12 bytes", "hold 10");
        refused(file("negshape.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0), "negative dimension");
        refused(file("floatshape.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,0]}}", 0), "shape is not a list of integers");
        refused(file("overflow.safetensors", "{\"w\":{\"dtype\":\"I64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0),
            "more bytes than a long counts");
    }

    @Test
    void shouldRefuseMissingAndUnknownEntryKeys() throws IOException {
        refused(file("nodtype.safetensors", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "tensor 'w'", "no \"dtype\"");
        refused(file("extra.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4),
            "tensor 'w'", "unknown key \"x\"");
        refused(file("threeoffsets.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8),
            "data_offsets is not a list of 2 integers");
        refused(file("meta.safetensors", "{\"__metadata__\":{\"n\":1}}", 0), "__metadata__ value of \"n\" is not a string");
    }

    @Test
    void shouldReadBackWhatTheWriterLaysOut() {
        Path p = dir.resolve("written.safetensors");
        SafeTensorsHeader made = SafeTensorsWriter.create(p, List.of(
            new SafeTensorsWriter.Planned("byte", SafeTensorsDtype.U8, new long[] {3}),
            new SafeTensorsWriter.Planned("wide \"quoted\" \u00e9", SafeTensorsDtype.I64, new long[] {2, 2}),
            new SafeTensorsWriter.Planned("empty", SafeTensorsDtype.F16, new long[] {0})), Map.of("format", "pt", "k\n", "v\\"));
        SafeTensorsHeader read = SafeTensorsHeader.read(p);
        assertEquals(made.tensors(), read.tensors());
        assertEquals(Map.of("format", "pt", "k\n", "v\\"), read.metadata());
        assertEquals(0, read.dataStart() % 8, "the header is padded to 8 bytes");
        assertEquals(0, read.tensor("wide \"quoted\" \u00e9").begin(), "the widest dtype comes first");
        assertEquals(32, read.tensor("byte").begin());
        assertEquals(read.dataStart() + 35, read.fileSize());
        assertThrows(IllegalArgumentException.class, () -> SafeTensorsWriter.create(dir.resolve("dup.safetensors"), List.of(
            new SafeTensorsWriter.Planned("a", SafeTensorsDtype.U8, new long[] {1}),
            new SafeTensorsWriter.Planned("a", SafeTensorsDtype.U8, new long[] {1})), Map.of()));
    }

    @Test
    void shouldRefuseAnIndexThatDisagreesWithItsFiles() throws IOException {
        Path data = file("model-00001-of-00001.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
        Path index = dir.resolve("model.safetensors.index.json");
        Files.writeString(index, "{\"weight_map\": {\"w\": \"" + data.getFileName() + "\", \"v\": \"" + data.getFileName() + "\"}}");
        SafeTensorsException e = assertThrows(SafeTensorsException.class, () -> SafeTensorsCheckpoint.open(index));
        assertTrue(e.getMessage().contains("tensor 'v'") && e.getMessage().contains("whose header does not have it"), e.getMessage());
        Files.writeString(index, "{\"weight_map\": {\"w\": \"../elsewhere.safetensors\"}}");
        e = assertThrows(SafeTensorsException.class, () -> SafeTensorsCheckpoint.open(index));
        assertTrue(e.getMessage().contains("outside the index's directory"), e.getMessage());
        Files.writeString(index, "{\"weight_map\": {\"w\": \"" + data.getFileName() + "\"}}");
        assertEquals(List.of("w"), SafeTensorsCheckpoint.open(index).names());
        e = assertThrows(SafeTensorsException.class, () -> SafeTensorsCheckpoint.open(List.of(index, data)));
        assertTrue(e.getMessage().contains("given twice"), e.getMessage());
    }
}
