package org.dtorch.core.safetensors;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Lays out a safetensors file and writes its header: the header lists the tensors in the order given; their data
 * follow with the wider dtypes first (so that every tensor starts at a multiple of its element size), in the order
 * given within a dtype width; and the header is padded with spaces to a multiple of 8 bytes, as the reference writer
 * does. The file is created (or truncated) and sized to hold every
 * tensor; the data is written afterwards, each shard into its place ({@link MappedShards#write}).
 *
 * <p>Thread-safe: stateless.
 */
public final class SafeTensorsWriter {

    private SafeTensorsWriter() {
    }

    /**
     * A tensor to lay out.
     *
     * @param name  its name (not {@code __metadata__})
     * @param dtype its dtype
     * @param shape its shape
     */
    public record Planned(String name, SafeTensorsDtype dtype, long[] shape) {
        /** Validates and copies. */
        public Planned {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(dtype, "dtype");
            shape = shape.clone();
        }

        @Override
        public long[] shape() {
            return shape.clone();
        }

        long nbytes() {
            return Math.multiplyExact(TensorEntry.numel(shape), (long) dtype.elementSize());
        }
    }

    /**
     * Creates {@code file} with the header of {@code tensors} and {@code metadata}, sized to hold their data (the data
     * bytes read as zeros until written), and returns that header as a reader sees it.
     *
     * @throws IllegalArgumentException for a duplicate or reserved name, or a shape with a negative dimension
     * @throws UncheckedIOException     if the file cannot be written
     */
    public static SafeTensorsHeader create(Path file, List<Planned> tensors, Map<String, String> metadata) {
        byte[] header = headerBytes(tensors, metadata);
        long dataBytes = 0;
        for (Planned p : tensors) {
            dataBytes = Math.addExact(dataBytes, p.nbytes());
        }
        long dataStart = 8L + header.length;
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
            StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer prefix = ByteBuffer.allocate(8 + header.length).order(ByteOrder.LITTLE_ENDIAN);
            prefix.putLong(header.length).put(header).flip();
            while (prefix.hasRemaining()) {
                channel.write(prefix);
            }
            if (dataBytes > 0) {
                // Sizes the file by its last byte: the rest is a hole that reads as zeros until the shards fill it.
                channel.write(ByteBuffer.allocate(1), dataStart + dataBytes - 1);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(file + ": cannot write the safetensors header: " + e.getMessage(), e);
        }
        return SafeTensorsHeader.parse(file, dataStart + dataBytes, dataStart, new String(header, StandardCharsets.UTF_8));
    }

    /**
     * Refuses a duplicate or reserved name, a negative dimension, or data beyond a long, before any file is touched.
     *
     * @throws IllegalArgumentException naming the tensor
     */
    public static void validate(List<Planned> tensors) {
        Set<String> names = new HashSet<>();
        for (Planned p : tensors) {
            if (p.name().equals(SafeTensorsHeader.METADATA_KEY)) {
                throw new IllegalArgumentException("a tensor cannot be named " + SafeTensorsHeader.METADATA_KEY + ": the format reserves it");
            }
            if (!names.add(p.name())) {
                throw new IllegalArgumentException("two tensors are named '" + p.name() + "'");
            }
            for (long s : p.shape()) {
                if (s < 0) {
                    throw new IllegalArgumentException("tensor '" + p.name() + "' has a negative dimension in " + Arrays.toString(p.shape()));
                }
            }
            if (TensorEntry.numel(p.shape()) < 0 || TensorEntry.numel(p.shape()) > Long.MAX_VALUE / p.dtype().elementSize()) {
                throw new IllegalArgumentException("tensor '" + p.name() + "' of shape " + Arrays.toString(p.shape()) + " has more bytes than a long counts");
            }
        }
    }

    /** The header JSON of {@code tensors} and {@code metadata}, padded with spaces to a multiple of 8 bytes. */
    static byte[] headerBytes(List<Planned> tensors, Map<String, String> metadata) {
        validate(tensors);
        List<Planned> order = new ArrayList<>(tensors);
        order.sort(Comparator.comparingInt((Planned p) -> -p.dtype().elementSize()));
        StringBuilder json = new StringBuilder("{");
        if (metadata != null && !metadata.isEmpty()) {
            string(json, SafeTensorsHeader.METADATA_KEY).append(":{");
            boolean first = true;
            for (Map.Entry<String, String> e : metadata.entrySet()) {
                if (!first) {
                    json.append(',');
                }
                first = false;
                string(json, Objects.requireNonNull(e.getKey(), "metadata key")).append(':');
                string(json, Objects.requireNonNull(e.getValue(), "metadata value of " + e.getKey()));
            }
            json.append('}');
        }
        Map<String, Long> begins = new java.util.HashMap<>();
        long offset = 0;
        for (Planned p : order) {
            begins.put(p.name(), offset);
            offset += p.nbytes();
        }
        for (Planned p : tensors) {
            if (json.length() > 1) {
                json.append(',');
            }
            long begin = begins.get(p.name());
            string(json, p.name()).append(":{\"dtype\":\"").append(p.dtype().name()).append("\",\"shape\":[");
            long[] shape = p.shape();
            for (int d = 0; d < shape.length; d++) {
                json.append(d == 0 ? "" : ",").append(shape[d]);
            }
            json.append("],\"data_offsets\":[").append(begin).append(',').append(begin + p.nbytes()).append("]}");
        }
        json.append('}');
        byte[] bytes = json.toString().getBytes(StandardCharsets.UTF_8);
        int padded = (bytes.length + 7) / 8 * 8;
        byte[] out = Arrays.copyOf(bytes, padded);
        Arrays.fill(out, bytes.length, padded, (byte) ' ');
        return out;
    }

    /**
     * Writes the index of a sharded checkpoint: {@code {"metadata": {"total_size": totalSize}, "weight_map": {...}}}, the
     * file names relative to the index's directory (as {@link SafeTensorsCheckpoint#open} reads them).
     *
     * @throws UncheckedIOException if the file cannot be written
     */
    public static void writeIndex(Path index, Map<String, String> weightMap, long totalSize) {
        StringBuilder json = new StringBuilder("{\n  \"metadata\": {\"total_size\": ").append(totalSize).append("},\n  \"weight_map\": {");
        boolean first = true;
        for (Map.Entry<String, String> e : weightMap.entrySet()) {
            json.append(first ? "\n    " : ",\n    ");
            first = false;
            string(json, e.getKey()).append(": ");
            string(json, e.getValue());
        }
        json.append("\n  }\n}\n");
        try {
            java.nio.file.Files.writeString(index, json, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(index + ": cannot write the index: " + e.getMessage(), e);
        }
    }

    /** {@code s} as a JSON string: quote, backslash and control characters escaped, the rest as UTF-8. */
    private static StringBuilder string(StringBuilder json, String s) {
        json.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                case '\n' -> json.append("\\n");
                case '\r' -> json.append("\\r");
                case '\t' -> json.append("\\t");
                default -> {
                    if (c < 0x20 || Character.isSurrogate(c) && !validPair(s, i)) {
                        json.append(String.format("\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        return json.append('"');
    }

    /** True when the surrogate at {@code i} belongs to a well-formed pair (UTF-8 can encode it). */
    private static boolean validPair(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }
}
