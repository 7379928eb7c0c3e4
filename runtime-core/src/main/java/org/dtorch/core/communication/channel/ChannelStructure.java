package org.dtorch.core.communication.channel;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;

/**
 * A published value taken apart into its distinct tensor leaves and a skeleton, and put back together. Containers
 * are {@link Map} (insertion order kept; keys are strings or whole numbers), {@link List} and {@code Object[]} (the
 * facade's tuple); other leaves are {@code null}, strings, booleans, ints, longs and doubles. A tensor met a second
 * time (the same Java object) becomes a reference to the first leaf, so it is sent once and comes back as one tensor
 * in both places. The skeleton is tagged bytes, one tag per node:
 *
 * <pre>
 *  NULL | TENSOR index:int | MAP n:int (key value)* | LIST n:int value* | ARRAY n:int value*
 *  | STRING utf | LONG long | INT int | DOUBLE double | BOOLEAN byte
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
final class ChannelStructure {
    private static final int NULL = 0;
    private static final int TENSOR = 1;
    private static final int MAP = 2;
    private static final int LIST = 3;
    private static final int ARRAY = 4;
    private static final int STRING = 5;
    private static final int LONG = 6;
    private static final int INT = 7;
    private static final int DOUBLE = 8;
    private static final int BOOLEAN = 9;
    /** Deeper structures are refused: a cycle would otherwise recurse until the stack ran out. */
    private static final int MAX_DEPTH = 64;

    private ChannelStructure() {
    }

    /**
     * A value taken apart.
     *
     * @param leaves   the distinct tensors, in order of first appearance
     * @param skeleton the tagged skeleton
     */
    record Flat(List<Tensor> leaves, byte[] skeleton) {
    }

    /**
     * Takes {@code value} apart.
     *
     * @throws IllegalArgumentException naming the path of the first node of an unsupported type, a map key that is not
     *                                  a string or whole number, or a structure nested deeper than 64
     */
    static Flat flatten(Object value) {
        IdentityHashMap<Tensor, Integer> indices = new IdentityHashMap<>();
        List<Tensor> leaves = new ArrayList<>();
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            write(out, value, "value", 0, indices, leaves);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new Flat(List.copyOf(leaves), bytes.toByteArray());
    }

    private static void write(DataOutputStream out, Object node, String path, int depth, IdentityHashMap<Tensor, Integer> indices,
                              List<Tensor> leaves) throws IOException {
        if (depth > MAX_DEPTH) {
            throw new IllegalArgumentException("a channel value nests deeper than " + MAX_DEPTH + " at " + path + " (a cycle?)");
        }
        switch (node) {
            case null -> out.writeByte(NULL);
            case Tensor t -> {
                Integer index = indices.get(t);
                if (index == null) {
                    index = leaves.size();
                    indices.put(t, index);
                    leaves.add(t);
                }
                out.writeByte(TENSOR);
                out.writeInt(index);
            }
            case Map<?, ?> map -> {
                out.writeByte(MAP);
                out.writeInt(map.size());
                for (Map.Entry<?, ?> e : map.entrySet()) {
                    Object key = e.getKey();
                    if (!(key instanceof String || key instanceof Integer || key instanceof Long)) {
                        throw new IllegalArgumentException("a channel value's map keys must be strings or whole numbers, got "
                            + (key == null ? "null" : key.getClass().getName()) + " at " + path);
                    }
                    write(out, key, path + "[" + key + "]", depth + 1, indices, leaves);
                    write(out, e.getValue(), path + "[" + key + "]", depth + 1, indices, leaves);
                }
            }
            case List<?> list -> {
                out.writeByte(LIST);
                writeAll(out, list.toArray(), path, depth, indices, leaves);
            }
            case Object[] array -> {
                out.writeByte(ARRAY);
                writeAll(out, array, path, depth, indices, leaves);
            }
            case String s -> {
                out.writeByte(STRING);
                out.writeUTF(s);
            }
            case Long l -> {
                out.writeByte(LONG);
                out.writeLong(l);
            }
            case Integer i -> {
                out.writeByte(INT);
                out.writeInt(i);
            }
            case Double d -> {
                out.writeByte(DOUBLE);
                out.writeDouble(d);
            }
            case Boolean b -> {
                out.writeByte(BOOLEAN);
                out.writeBoolean(b);
            }
            default -> throw new IllegalArgumentException("a channel carries maps, lists, arrays, tensors, strings, numbers and "
                + "booleans; got " + node.getClass().getName() + " at " + path + " (turn it into one of those first)");
        }
    }

    private static void writeAll(DataOutputStream out, Object[] items, String path, int depth, IdentityHashMap<Tensor, Integer> indices,
                                 List<Tensor> leaves) throws IOException {
        out.writeInt(items.length);
        for (int i = 0; i < items.length; i++) {
            write(out, items[i], path + "[" + i + "]", depth + 1, indices, leaves);
        }
    }

    /** Puts a value back together from {@code skeleton}, with {@code leaves} in place of the leaf indices. */
    static Object rebuild(byte[] skeleton, List<Tensor> leaves) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(skeleton))) {
            return read(in, leaves);
        } catch (IOException e) {
            throw new IllegalArgumentException("a WorkerTensorRef's skeleton is malformed: " + e, e);
        }
    }

    private static Object read(DataInputStream in, List<Tensor> leaves) throws IOException {
        int tag = in.readByte();
        return switch (tag) {
            case NULL -> null;
            case TENSOR -> leaves.get(in.readInt());
            case MAP -> {
                int n = in.readInt();
                Map<Object, Object> map = new LinkedHashMap<>();
                for (int i = 0; i < n; i++) {
                    map.put(read(in, leaves), read(in, leaves));
                }
                yield map;
            }
            case LIST -> new ArrayList<>(Arrays.asList(readAll(in, leaves)));
            case ARRAY -> readAll(in, leaves);
            case STRING -> in.readUTF();
            case LONG -> in.readLong();
            case INT -> in.readInt();
            case DOUBLE -> in.readDouble();
            case BOOLEAN -> in.readBoolean();
            default -> throw new IOException("unknown tag " + tag);
        };
    }

    private static Object[] readAll(DataInputStream in, List<Tensor> leaves) throws IOException {
        Object[] items = new Object[in.readInt()];
        for (int i = 0; i < items.length; i++) {
            items[i] = read(in, leaves);
        }
        return items;
    }
}
