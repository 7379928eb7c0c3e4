package org.dtorch.core.communication.channel;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * What a producer publishes instead of its tensors: the channel, the position in the producer's order, where each
 * distinct tensor leaf lies, and the skeleton of the published structure. A few hundred bytes, whatever the tensors
 * weigh; {@link #toBytes()} and {@link #fromBytes(byte[])} carry it over any control path (a worker's control
 * frames, a channel's own ref queues).
 *
 * <p>Thread-safe: an immutable value (the arrays are not to be modified; equality is by identity for them).
 *
 * @param channel  the channel's name
 * @param sequence the producer's publish count, from 1: every consumer resolves or discards refs in this order
 * @param leaves   the distinct tensor leaves, in the order of their first appearance in the structure
 * @param skeleton the structure with leaves replaced by their index ({@link ChannelStructure})
 */
public record WorkerTensorRef(String channel, long sequence, List<Leaf> leaves, byte[] skeleton) {
    private static final int MAGIC = 0x52435444; // "DTCR"

    /**
     * Where one tensor leaf lies.
     *
     * @param profile    the persistent profile holding it, or {@link #FALLBACK} for a region of its own
     * @param slot       the profile's slot (0 or 1); 0 for a fallback
     * @param generation the profile's use count when this was staged (the ACK a consumer publishes); 0 for a fallback
     * @param dtype      the libtorch dtype code
     * @param shape      the whole tensor's shape, as staged
     * @param offset     the first byte in its region
     * @param shardDim   the dimension each consumer rank takes its balanced share of, or -1 for the whole tensor
     * @param region     the region's name
     * @param device     the CUDA device index of the published tensor, or -1 for a CPU tensor
     * @param handles    what a consumer needs besides the name to reach the slot (a CUDA pool's IPC descriptor and
     *                   the slot's ready event handle); empty for shared memory
     */
    public record Leaf(int profile, int slot, long generation, int dtype, long[] shape, long offset, int shardDim, String region,
                       int device, byte[] handles) {
        /** The profile number of a leaf sent through a region of its own. */
        public static final int FALLBACK = -1;

        @Override
        public String toString() {
            return "Leaf(profile " + profile + ", slot " + slot + ", generation " + generation + ", dtype " + dtype + ", shape "
                + Arrays.toString(shape) + ", shardDim " + shardDim + ", " + region + "+" + offset + (device >= 0 ? ", cuda:" + device : "")
                + ")";
        }
    }

    /** The serialized form. */
    public byte[] toBytes() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(128 + 64 * leaves.size() + skeleton.length);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(MAGIC);
            out.writeUTF(channel);
            out.writeLong(sequence);
            out.writeInt(leaves.size());
            for (Leaf leaf : leaves) {
                out.writeInt(leaf.profile());
                out.writeInt(leaf.slot());
                out.writeLong(leaf.generation());
                out.writeInt(leaf.dtype());
                out.writeInt(leaf.shape().length);
                for (long s : leaf.shape()) {
                    out.writeLong(s);
                }
                out.writeLong(leaf.offset());
                out.writeInt(leaf.shardDim());
                out.writeUTF(leaf.region());
                out.writeInt(leaf.device());
                out.writeInt(leaf.handles().length);
                out.write(leaf.handles());
            }
            out.writeInt(skeleton.length);
            out.write(skeleton);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    /**
     * A ref read back from {@link #toBytes()}.
     *
     * @throws IllegalArgumentException if {@code bytes} is not a serialized ref
     */
    public static WorkerTensorRef fromBytes(byte[] bytes) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            if (in.readInt() != MAGIC) {
                throw new IllegalArgumentException("not a serialized WorkerTensorRef (" + bytes.length + " bytes, wrong magic)");
            }
            String channel = in.readUTF();
            long sequence = in.readLong();
            int count = in.readInt();
            List<Leaf> leaves = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                int profile = in.readInt();
                int slot = in.readInt();
                long generation = in.readLong();
                int dtype = in.readInt();
                long[] shape = new long[in.readInt()];
                for (int d = 0; d < shape.length; d++) {
                    shape[d] = in.readLong();
                }
                long offset = in.readLong();
                int shardDim = in.readInt();
                String region = in.readUTF();
                int device = in.readInt();
                byte[] handles = new byte[in.readInt()];
                in.readFully(handles);
                leaves.add(new Leaf(profile, slot, generation, dtype, shape, offset, shardDim, region, device, handles));
            }
            byte[] skeleton = new byte[in.readInt()];
            in.readFully(skeleton);
            if (in.read() != -1) {
                throw new IllegalArgumentException("a serialized WorkerTensorRef has trailing bytes");
            }
            return new WorkerTensorRef(channel, sequence, List.copyOf(leaves), skeleton);
        } catch (IOException | NegativeArraySizeException e) {
            throw new IllegalArgumentException("not a serialized WorkerTensorRef (" + bytes.length + " bytes): " + e, e);
        }
    }

    @Override
    public String toString() {
        return "WorkerTensorRef(" + channel + " #" + sequence + ", " + leaves.size() + " leaves)";
    }
}
