package org.dtorch.core.graph;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.List;
import java.util.Objects;
import java.util.TreeSet;

/**
 * One node of the graph: an {@link OpSpec} (type and parameters) applied to input operands, producing
 * output operands. Ids grow in the order the client created operators, which is a topological order.
 *
 * <p>Thread-safe: immutable apart from the count of devices still to run it, which is atomic.
 */
public final class Operator {
    private static final VarHandle DEVICES_LEFT;

    static {
        try {
            DEVICES_LEFT = MethodHandles.lookup().findVarHandle(Operator.class, "devicesLeft", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final long id;
    private final OpSpec spec;
    private final List<Operand> inputs;
    private final List<Operand> outputs;
    private final List<Long> devices;
    /**
     * The operands' ids, inputs then outputs, and the mesh all of them live on (null if they differ), copied here
     * on the client's thread so that a device runs the operator without reading the operand objects, whose use
     * counts the dispatching thread keeps writing (each such read would be a cache miss on another core's line).
     */
    private final long[] operandIds;
    private final org.dtorch.core.distributed.DeviceMesh commonMesh;
    /** Devices still to run it; changed atomically through {@link #DEVICES_LEFT}. */
    @SuppressWarnings("unused")
    private volatile int devicesLeft;

    Operator(long id, OpSpec spec, List<Operand> inputs, List<Operand> outputs) {
        this.id = id;
        this.spec = Objects.requireNonNull(spec, "spec");
        this.inputs = List.copyOf(inputs);
        this.outputs = List.copyOf(outputs);
        this.operandIds = new long[this.inputs.size() + this.outputs.size()];
        for (int i = 0; i < this.inputs.size(); i++) {
            operandIds[i] = this.inputs.get(i).id();
        }
        for (int i = 0; i < this.outputs.size(); i++) {
            operandIds[this.inputs.size() + i] = this.outputs.get(i).id();
        }
        this.commonMesh = commonMesh();
        this.devices = List.copyOf(spec.devices(this));
        this.devicesLeft = devices.size();
    }

    /**
     * An operator rebuilt in a worker process from what the controller sent: same id, spec and operands.
     * Only the per-device-process runtime calls it.
     */
    public static Operator remote(long id, OpSpec spec, List<Operand> inputs, List<Operand> outputs) {
        return new Operator(id, spec, inputs, outputs);
    }

    /** The operator's id: its position in the client's program. */
    public long id() {
        return id;
    }

    /** Type and parameters. */
    public OpSpec spec() {
        return spec;
    }

    /** The operands it reads (and, for in-place operators, writes). */
    public List<Operand> inputs() {
        return inputs;
    }

    /** The operands it creates. */
    public List<Operand> outputs() {
        return outputs;
    }

    /** The id of input {@code i}. */
    public long inputId(int i) {
        return operandIds[i];
    }

    /** The id of output {@code i}. */
    public long outputId(int i) {
        return operandIds[inputs.size() + i];
    }

    /** The mesh every input and output lives on, or null when they differ or there are none. */
    public org.dtorch.core.distributed.DeviceMesh operandMesh() {
        return commonMesh;
    }

    /** The devices that run it, sorted. */
    public List<Long> devices() {
        return devices;
    }

    /** Every device of every input's and output's mesh, sorted: what {@link OpSpec#devices} returns by default. */
    List<Long> defaultDevices() {
        org.dtorch.core.distributed.DeviceMesh common = commonMesh;
        if (common != null) {
            return sorted(common.deviceIds());
        }
        TreeSet<Long> all = new TreeSet<>();
        for (Operand o : inputs) {
            all.addAll(o.meta().sharding().mesh().deviceIds());
        }
        for (Operand o : outputs) {
            all.addAll(o.meta().sharding().mesh().deviceIds());
        }
        return List.copyOf(all);
    }

    /** The mesh every operand lives on, or null if they differ. */
    private org.dtorch.core.distributed.DeviceMesh commonMesh() {
        org.dtorch.core.distributed.DeviceMesh mesh = null;
        for (List<Operand> operands : List.of(inputs, outputs)) {
            for (Operand o : operands) {
                org.dtorch.core.distributed.DeviceMesh m = o.meta().sharding().mesh();
                if (mesh == null) {
                    mesh = m;
                } else if (m != mesh && !m.sameDevicesAs(mesh)) {
                    return null;
                }
            }
        }
        return mesh;
    }

    private static List<Long> sorted(List<Long> ids) {
        for (int i = 1; i < ids.size(); i++) {
            if (ids.get(i - 1) > ids.get(i)) {
                return List.copyOf(new TreeSet<>(ids));
            }
        }
        return ids;
    }

    /** Records that one device has run the operator; true for the last one. */
    public boolean deviceDone() {
        // One device is always the last: no atomic write on a line the client's thread made.
        return devices.size() == 1 || (int) DEVICES_LEFT.getAndAdd(this, -1) == 1;
    }

    /** Hashes the id, so that a set of operators needs no boxed key (identity stays the equality). */
    @Override
    @SuppressWarnings("checkstyle:EqualsHashCode")
    public int hashCode() {
        return Long.hashCode(id);
    }

    /** {@code add#12}, for messages. */
    public String label() {
        return spec.name() + "#" + id;
    }

    @Override
    public String toString() {
        return label() + inputs.stream().map(o -> "%" + o.id()).toList() + " -> " + outputs.stream().map(o -> "%" + o.id()).toList();
    }
}
