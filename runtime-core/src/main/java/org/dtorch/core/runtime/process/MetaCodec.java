package org.dtorch.core.runtime.process;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Partial;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Shard;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.TensorMeta;

/**
 * The encoding of tensor metadata: meshes, placements, shardings and {@link TensorMeta}.
 *
 * <pre>
 *   mesh      := kind:byte  shape:int[]  ids:long[]  dimNames:(count:int, string...)
 *   placement := 0 (R) | 1 dim:int (S) | 2 op:byte (P)
 *   sharding  := mesh  count:int  placement...
 *   meta      := shape:long[]  dtype:int  sharding
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
final class MetaCodec {
    private static final int MAX_MESH_DIMS = 16;

    private MetaCodec() {
    }

    static void writeMeta(WireWriter out, TensorMeta meta) {
        out.putLongs(meta.shape());
        out.putDtype(meta.dtype());
        writeSharding(out, meta.sharding());
    }

    static TensorMeta readMeta(WireReader in, String what) {
        int start = in.position();
        long[] shape = in.getShape("shape");
        var dtype = in.getDtype("dtype");
        Sharding sharding = readSharding(in, what);
        Key key = new Key(in.span(start, in.position()));
        synchronized (RECENT) {
            TensorMeta seen = RECENT.get(key);
            if (seen != null) {
                return seen; // the same bytes decode to the same (immutable) metadata, its layout computed once
            }
        }
        TensorMeta meta;
        try {
            meta = new TensorMeta(shape, dtype, sharding);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(what + ": " + e.getMessage(), e);
        }
        synchronized (RECENT) {
            RECENT.put(key, meta);
        }
        return meta;
    }

    /** Encoded metadata as a map key. */
    private record Key(byte[] bytes) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && java.util.Arrays.equals(k.bytes, bytes);
        }

        @Override
        public int hashCode() {
            return java.util.Arrays.hashCode(bytes);
        }
    }

    /** Metadata decoded recently: a program uses a few shapes and meshes over and over. */
    private static final java.util.Map<Key, TensorMeta> RECENT = new java.util.LinkedHashMap<>(256, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(java.util.Map.Entry<Key, TensorMeta> eldest) {
            return size() > 256;
        }
    };

    static void writeSharding(WireWriter out, Sharding sharding) {
        DeviceMesh mesh = sharding.mesh();
        out.putByte(mesh.kind().ordinal());
        out.putInts(mesh.shape());
        out.putLongs(mesh.deviceIds().stream().mapToLong(Long::longValue).toArray());
        out.putInt(mesh.dimNames().size());
        mesh.dimNames().forEach(out::putString);
        out.putInt(sharding.placements().size());
        for (Placement p : sharding.placements()) {
            switch (p) {
                case org.dtorch.core.distributed.Replicate r -> out.putByte(0);
                case Shard s -> out.putByte(1).putInt(s.dim());
                case Partial partial -> out.putByte(2).putByte(partial.op().ordinal());
            }
        }
    }

    static Sharding readSharding(WireReader in, String what) {
        // Labels are constants: they only matter in errors, and building them costs on every operator.
        int kind = in.getByteIn("mesh kind", 0, DeviceKind.values().length - 1);
        int[] shape = in.getInts("mesh shape");
        long[] ids = in.getLongs("mesh ids");
        int names = in.getCount("mesh dim names", MAX_MESH_DIMS);
        List<String> dimNames = new ArrayList<>(names);
        for (int i = 0; i < names; i++) {
            dimNames.add(in.getString("mesh dim name"));
        }
        if (shape.length > MAX_MESH_DIMS) {
            throw new ProtocolException(what + ": a mesh of " + shape.length + " dims");
        }
        DeviceMesh mesh;
        try {
            mesh = DeviceMesh.of(DeviceKind.values()[kind], shape, ids, dimNames);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(what + ": " + e.getMessage(), e);
        }
        int count = in.getCount("placements", MAX_MESH_DIMS);
        List<Placement> placements = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int tag = in.getByte("placement");
            placements.add(switch (tag) {
                case 0 -> Placement.replicate();
                case 1 -> Placement.shard(in.getIntIn("shard dim", 0, 63));
                case 2 -> Placement.partial(ReduceOpType.values()[in.getByteIn("partial op", 0, ReduceOpType.values().length - 1)]);
                default -> throw new ProtocolException(what + ": unknown placement tag " + tag);
            });
        }
        try {
            return new Sharding(mesh, placements);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(what + ": " + e.getMessage(), e);
        }
    }
}
