package org.dtorch.core.safetensors;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The header of one safetensors file, read and validated whole before any tensor data is touched.
 *
 * <pre>
 *   offset 0          8                       8 + N                                   file size
 *          +----------+-----------------------+-------------------------------------------+
 *          | N (u64,  | N bytes of UTF-8 JSON | data: each tensor's bytes, row-major,     |
 *          |  little  | (may end in spaces)   | little-endian, at data_offsets [begin,    |
 *          |  endian) |                       | end) counted from offset 8 + N            |
 *          +----------+-----------------------+-------------------------------------------+
 *   JSON: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
 *          "__metadata__": {"key": "value", ...}}   (metadata optional; string values only)
 * </pre>
 *
 * <p>{@link #read} refuses, naming the file and (where one is at fault) the tensor: a file shorter than 8 bytes, a
 * header length past the end of the file or above {@value #MAX_HEADER_BYTES} bytes, a header that is not UTF-8 JSON or
 * not an object, an entry with a missing or unknown key, a dtype this runtime does not support (by its name), a shape
 * that is not a list of non-negative integers, offsets that are not two integers in order inside the data section (a
 * truncated file fails here), a byte count other than the shape's element count times the element size, and two
 * tensors whose bytes overlap.
 *
 * <p>Thread-safe: immutable.
 */
public final class SafeTensorsHeader {
    /** The largest header accepted, as the reference implementation bounds it: a hostile length allocates no more. */
    public static final long MAX_HEADER_BYTES = 100L << 20;
    /** The member that holds the file's metadata rather than a tensor. */
    public static final String METADATA_KEY = "__metadata__";
    private static final Set<String> ENTRY_KEYS = Set.of("dtype", "shape", "data_offsets");

    private final Path file;
    private final long fileSize;
    private final long dataStart;
    private final Map<String, TensorEntry> tensors;
    private final Map<String, String> metadata;

    private SafeTensorsHeader(Path file, long fileSize, long dataStart, Map<String, TensorEntry> tensors, Map<String, String> metadata) {
        this.file = file;
        this.fileSize = fileSize;
        this.dataStart = dataStart;
        this.tensors = Collections.unmodifiableMap(tensors);
        this.metadata = Collections.unmodifiableMap(metadata);
    }

    /**
     * Reads and validates the header of {@code file}; reads no tensor data.
     *
     * @throws SafeTensorsException  if the file is not a valid safetensors file (the message names the file and tensor)
     * @throws UncheckedIOException  if the file cannot be read
     */
    public static SafeTensorsHeader read(Path file) {
        Objects.requireNonNull(file, "file");
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = channel.size();
            if (size < 8) {
                throw new SafeTensorsException(file, "truncated: " + size + " bytes, shorter than the 8-byte header length");
            }
            ByteBuffer lengthBytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            readFully(channel, lengthBytes, 0);
            long n = lengthBytes.getLong(0);
            if (n < 0 || n > size - 8) {
                throw new SafeTensorsException(file, "header length " + Long.toUnsignedString(n) + " runs past the end of the file ("
                    + size + " bytes, so at most " + (size - 8) + ")");
            }
            if (n > MAX_HEADER_BYTES) {
                throw new SafeTensorsException(file, "header length " + n + " is above the " + MAX_HEADER_BYTES + " bytes accepted");
            }
            ByteBuffer headerBytes = ByteBuffer.allocate((int) n);
            readFully(channel, headerBytes, 8);
            headerBytes.flip();
            String json;
            try {
                json = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(headerBytes).toString();
            } catch (CharacterCodingException e) {
                throw new SafeTensorsException(file, "header is not UTF-8 (" + e + ")");
            }
            return parse(file, size, 8 + n, json);
        } catch (NoSuchFileException e) {
            throw new SafeTensorsException(file, "no such file");
        } catch (IOException e) {
            throw new UncheckedIOException(file + ": cannot read the safetensors header: " + e.getMessage(), e);
        }
    }

    private static void readFully(FileChannel channel, ByteBuffer into, long position) throws IOException {
        long at = position;
        while (into.hasRemaining()) {
            int read = channel.read(into, at);
            if (read < 0) {
                throw new IOException("the file ended while reading its header");
            }
            at += read;
        }
    }

    /** Validates the header text {@code json} of a file of {@code fileSize} bytes whose data starts at {@code dataStart}. */
    static SafeTensorsHeader parse(Path file, long fileSize, long dataStart, String json) {
        Object root;
        try {
            root = StrictJson.parse(json);
        } catch (IllegalArgumentException e) {
            throw new SafeTensorsException(file, "header is not JSON: " + e.getMessage());
        }
        if (!(root instanceof Map<?, ?> members)) {
            throw new SafeTensorsException(file, "header is not a JSON object");
        }
        long dataSize = fileSize - dataStart;
        Map<String, TensorEntry> tensors = new LinkedHashMap<>();
        Map<String, String> metadata = new LinkedHashMap<>();
        for (Map.Entry<?, ?> member : members.entrySet()) {
            String name = (String) member.getKey();
            if (name.equals(METADATA_KEY)) {
                metadata = metadata(file, member.getValue());
            } else {
                tensors.put(name, entry(file, name, member.getValue(), dataSize));
            }
        }
        checkOverlaps(file, tensors.values());
        return new SafeTensorsHeader(file, fileSize, dataStart, tensors, metadata);
    }

    private static Map<String, String> metadata(Path file, Object value) {
        if (!(value instanceof Map<?, ?> map)) {
            throw new SafeTensorsException(file, METADATA_KEY + " is not an object of strings");
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : map.entrySet()) {
            if (!(e.getValue() instanceof String s)) {
                throw new SafeTensorsException(file, METADATA_KEY + " value of \"" + e.getKey() + "\" is not a string: " + e.getValue());
            }
            out.put((String) e.getKey(), s);
        }
        return out;
    }

    private static TensorEntry entry(Path file, String name, Object value, long dataSize) {
        if (!(value instanceof Map<?, ?> fields)) {
            throw new SafeTensorsException(file, name, "entry is not an object with dtype, shape and data_offsets");
        }
        for (String key : ENTRY_KEYS) {
            if (!fields.containsKey(key)) {
                throw new SafeTensorsException(file, name, "entry has no \"" + key + "\"");
            }
        }
        for (Object key : fields.keySet()) {
            if (!ENTRY_KEYS.contains(key)) {
                throw new SafeTensorsException(file, name, "entry has an unknown key \"" + key + "\" (expected dtype, shape, data_offsets)");
            }
        }
        if (!(fields.get("dtype") instanceof String dtypeName)) {
            throw new SafeTensorsException(file, name, "dtype is not a string: " + fields.get("dtype"));
        }
        SafeTensorsDtype dtype = SafeTensorsDtype.ofName(dtypeName);
        if (dtype == null) {
            throw new SafeTensorsException(file, name, "dtype " + dtypeName + " is not supported (supported: "
                + SafeTensorsDtype.supportedNames() + ")");
        }
        long[] shape = integers(file, name, "shape", fields.get("shape"), -1);
        for (long s : shape) {
            if (s < 0) {
                throw new SafeTensorsException(file, name, "shape " + Arrays.toString(shape) + " has a negative dimension");
            }
        }
        long[] offsets = integers(file, name, "data_offsets", fields.get("data_offsets"), 2);
        long begin = offsets[0];
        long end = offsets[1];
        if (begin < 0 || end < begin) {
            throw new SafeTensorsException(file, name, "data_offsets [" + begin + ", " + end + "] are not in order");
        }
        if (end > dataSize) {
            throw new SafeTensorsException(file, name, "data_offsets [" + begin + ", " + end + "] run past the end of the data ("
                + dataSize + " bytes after the header; is the file truncated?)");
        }
        long numel = TensorEntry.numel(shape);
        long expected = numel < 0 ? -1 : multiplyOrMinusOne(numel, dtype.elementSize());
        if (expected != end - begin) {
            throw new SafeTensorsException(file, name, "shape " + Arrays.toString(shape) + " of " + dtype + " needs "
                + (expected < 0 ? "more bytes than a long counts" : expected + " bytes") + ", but data_offsets [" + begin + ", " + end
                + "] hold " + (end - begin));
        }
        return new TensorEntry(name, dtype, shape, begin, end);
    }

    private static long multiplyOrMinusOne(long a, long b) {
        try {
            return Math.multiplyExact(a, b);
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    private static long[] integers(Path file, String name, String key, Object value, int count) {
        if (!(value instanceof List<?> list) || (count >= 0 && list.size() != count)) {
            throw new SafeTensorsException(file, name, key + " is not a list of " + (count >= 0 ? count + " " : "") + "integers: " + value);
        }
        long[] out = new long[list.size()];
        for (int i = 0; i < out.length; i++) {
            if (!(list.get(i) instanceof Long l)) {
                throw new SafeTensorsException(file, name, key + " is not a list of integers: " + value);
            }
            out[i] = l;
        }
        return out;
    }

    private static void checkOverlaps(Path file, java.util.Collection<TensorEntry> entries) {
        List<TensorEntry> sorted = new ArrayList<>();
        for (TensorEntry e : entries) {
            if (e.nbytes() > 0) {
                sorted.add(e);
            }
        }
        sorted.sort(Comparator.comparingLong(TensorEntry::begin));
        for (int i = 1; i < sorted.size(); i++) {
            TensorEntry before = sorted.get(i - 1);
            TensorEntry after = sorted.get(i);
            if (after.begin() < before.end()) {
                throw new SafeTensorsException(file, after.name(), "data_offsets [" + after.begin() + ", " + after.end()
                    + "] overlap those of '" + before.name() + "' [" + before.begin() + ", " + before.end() + "]");
            }
        }
    }

    /** The file. */
    public Path file() {
        return file;
    }

    /** The file's size when the header was read. */
    public long fileSize() {
        return fileSize;
    }

    /** The offset of the data section in the file: 8 plus the header length. */
    public long dataStart() {
        return dataStart;
    }

    /** The tensors by name, in the header's order. */
    public Map<String, TensorEntry> tensors() {
        return tensors;
    }

    /** The tensor {@code name}, or null. */
    public TensorEntry tensor(String name) {
        return tensors.get(name);
    }

    /** The {@code __metadata__} strings (empty if the header has none). */
    public Map<String, String> metadata() {
        return metadata;
    }

    @Override
    public String toString() {
        return "SafeTensorsHeader{" + file + ", " + tensors.size() + " tensors}";
    }
}
