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
        long[] shape = in.getShape(what + " shape");
        var dtype = in.getDtype(what + " dtype");
        Sharding sharding = readSharding(in, what);
        try {
            return new TensorMeta(shape, dtype, sharding);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(what + ": " + e.getMessage(), e);
        }
    }

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
        int kind = in.getByteIn(what + " mesh kind", 0, DeviceKind.values().length - 1);
        int[] shape = in.getInts(what + " mesh shape");
        long[] ids = in.getLongs(what + " mesh ids");
        int names = in.getCount(what + " mesh dim names", MAX_MESH_DIMS);
        List<String> dimNames = new ArrayList<>(names);
        for (int i = 0; i < names; i++) {
            dimNames.add(in.getString(what + " mesh dim name"));
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
        int count = in.getCount(what + " placements", MAX_MESH_DIMS);
        List<Placement> placements = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int tag = in.getByte(what + " placement");
            placements.add(switch (tag) {
                case 0 -> Placement.replicate();
                case 1 -> Placement.shard(in.getIntIn(what + " shard dim", 0, 63));
                case 2 -> Placement.partial(ReduceOpType.values()[in.getByteIn(what + " partial op", 0, ReduceOpType.values().length - 1)]);
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
