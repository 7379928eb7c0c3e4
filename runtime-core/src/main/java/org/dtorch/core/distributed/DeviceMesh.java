package org.dtorch.core.distributed;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.dtorch.core.device.DeviceKind;

/**
 * An n-dimensional array of device ids of one {@link DeviceKind}, with optional dimension names
 * (PyTorch's {@code DeviceMesh}). Ids are stored in row-major order.
 *
 * <p>The group of a device along one mesh dimension (DTorch's {@code ThreadGroupInfo}) is the devices
 * that share all its other coordinates, in coordinate order; its rank in that group is its coordinate.
 *
 * <p>Thread-safe: immutable.
 */
public final class DeviceMesh {
    private final DeviceKind kind;
    private final int[] shape;
    private final long[] ids;
    private final List<Long> idList;
    private final List<String> dimNames;
    /** Computed once: meshes are keys of the plan and strategy caches, hashed on every operator. */
    private final int hash;

    private DeviceMesh(DeviceKind kind, int[] shape, long[] ids, List<String> dimNames) {
        this.kind = Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(shape, "shape");
        Objects.requireNonNull(ids, "ids");
        if (shape.length == 0) {
            throw new IllegalArgumentException("a device mesh needs at least one dimension");
        }
        long count = deviceCount(shape);
        if (count != ids.length) {
            throw new IllegalArgumentException("mesh shape " + Arrays.toString(shape) + " holds " + count + " devices, got "
                + ids.length + " ids");
        }
        Set<Long> seen = new HashSet<>();
        for (long id : ids) {
            if (id < 0 || !seen.add(id)) {
                throw new IllegalArgumentException("mesh device ids must be distinct and >= 0, got " + Arrays.toString(ids));
            }
        }
        if (dimNames != null) {
            for (int i = 0; i < dimNames.size(); i++) {
                Objects.requireNonNull(dimNames.get(i), "mesh dimension name " + i + " is null");
            }
        }
        List<String> names = dimNames == null ? List.of() : List.copyOf(dimNames);
        if (!names.isEmpty() && names.size() != shape.length) {
            throw new IllegalArgumentException("mesh of " + shape.length + " dimensions needs " + shape.length + " names, got " + names);
        }
        if (new HashSet<>(names).size() != names.size()) {
            throw new IllegalArgumentException("mesh dimension names must be distinct, got " + names);
        }
        this.shape = shape.clone();
        this.ids = ids.clone();
        this.idList = Arrays.stream(ids).boxed().toList();
        this.dimNames = names;
        this.hash = Objects.hash(kind, Arrays.hashCode(this.shape), Arrays.hashCode(this.ids), names);
    }

    /** A mesh of the given shape whose ids are {@code 0..n-1} in row-major order. */
    public static DeviceMesh initDeviceMesh(DeviceKind kind, int[] shape, List<String> dimNames) {
        long count = deviceCount(Objects.requireNonNull(shape, "shape"));
        if (count > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("mesh shape " + Arrays.toString(shape) + " holds " + count + " devices, more than a mesh can number");
        }
        long[] ids = new long[(int) count];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i;
        }
        return new DeviceMesh(kind, shape, ids, dimNames);
    }

    /** A mesh of the given shape with explicit ids in row-major order. */
    public static DeviceMesh of(DeviceKind kind, int[] shape, long[] ids, List<String> dimNames) {
        return new DeviceMesh(kind, shape, ids, dimNames);
    }

    /** A one-dimensional mesh of the given devices. */
    public static DeviceMesh of(DeviceKind kind, long... ids) {
        return new DeviceMesh(kind, new int[] {ids.length}, ids, List.of());
    }

    /** The number of devices of {@code shape}: sizes must be >= 1 and their product must not overflow a long. */
    private static long deviceCount(int[] shape) {
        long count = 1;
        for (int s : shape) {
            if (s < 1) {
                throw new IllegalArgumentException("mesh dimensions must be >= 1, got shape " + Arrays.toString(shape));
            }
            try {
                count = Math.multiplyExact(count, s);
            } catch (ArithmeticException overflow) {
                throw new IllegalArgumentException("mesh shape " + Arrays.toString(shape) + " holds more devices than a long can count");
            }
        }
        return count;
    }

    /** The device kind of every device. */
    public DeviceKind kind() {
        return kind;
    }

    /**
     * The same devices, shape and names with devices of {@code other} kind: in a runtime on CUDA the CPU mesh
     * over ids {@code [0, 1]} is the host memory of the workers of CUDA devices {@code 0} and {@code 1}.
     */
    public DeviceMesh withKind(DeviceKind other) {
        return other == kind ? this : new DeviceMesh(other, shape, ids, dimNames);
    }

    /** The number of mesh dimensions. */
    public int ndim() {
        return shape.length;
    }

    /** The size of mesh dimension {@code dim}. */
    public int size(int dim) {
        checkDim(dim);
        return shape[dim];
    }

    /** The shape of the mesh. */
    public int[] shape() {
        return shape.clone();
    }

    /** The number of devices. */
    public int count() {
        return ids.length;
    }

    /** The device ids in row-major order (an immutable list, computed once). */
    public List<Long> deviceIds() {
        return idList;
    }

    /** The dimension names, empty if the mesh has none. */
    public List<String> dimNames() {
        return dimNames;
    }

    /** True when {@code deviceId} is in this mesh. */
    public boolean contains(long deviceId) {
        return indexOf(deviceId) >= 0;
    }

    /** The coordinates of {@code deviceId}. */
    public int[] coordinates(long deviceId) {
        int index = indexOf(deviceId);
        if (index < 0) {
            throw new IllegalArgumentException("device " + deviceId + " is not in " + this);
        }
        int[] coords = new int[shape.length];
        for (int d = shape.length - 1; d >= 0; d--) {
            coords[d] = index % shape[d];
            index /= shape[d];
        }
        return coords;
    }

    /** The device at the given coordinates. */
    public long deviceAt(int... coords) {
        if (coords.length != shape.length) {
            throw new IllegalArgumentException("mesh " + this + " needs " + shape.length + " coordinates, got " + Arrays.toString(coords));
        }
        int index = 0;
        for (int d = 0; d < shape.length; d++) {
            if (coords[d] < 0 || coords[d] >= shape[d]) {
                throw new IllegalArgumentException("coordinates " + Arrays.toString(coords) + " are outside mesh shape " + Arrays.toString(shape));
            }
            index = index * shape[d] + coords[d];
        }
        return ids[index];
    }

    /**
     * The devices along mesh dimension {@code dim} that share every other coordinate with {@code deviceId},
     * in coordinate order: the communication group of that device for a step on {@code dim}.
     */
    public List<Long> groupAlong(int dim, long deviceId) {
        checkDim(dim);
        int[] coords = coordinates(deviceId);
        List<Long> group = new ArrayList<>(shape[dim]);
        for (int c = 0; c < shape[dim]; c++) {
            coords[dim] = c;
            group.add(deviceAt(coords));
        }
        return group;
    }

    /** The index of the dimension called {@code name}. */
    public int dimIndex(String name) {
        int index = dimNames.indexOf(name);
        if (index < 0) {
            throw new IllegalArgumentException("mesh " + this + " has no dimension '" + name + "'"
                + (dimNames.isEmpty() ? " (its dimensions have no names)" : "; its dimensions are " + dimNames));
        }
        return index;
    }

    /** The sub-mesh over the named dimensions (in the given order) that contains {@code deviceId}. */
    public DeviceMesh subMesh(long deviceId, String... names) {
        int[] dims = new int[names.length];
        for (int i = 0; i < names.length; i++) {
            dims[i] = dimIndex(names[i]);
        }
        return subMesh(deviceId, dims);
    }

    /** Every sub-mesh over the named dimensions, one per combination of the other coordinates, row-major. */
    public List<DeviceMesh> subMeshes(String... names) {
        List<DeviceMesh> result = new ArrayList<>();
        for (long id : ids) {
            DeviceMesh sub = subMesh(id, names);
            if (sub.ids[0] == id) {
                result.add(sub);
            }
        }
        return result;
    }

    /** The sub-mesh over dimensions {@code dims} (in the given order) that contains {@code deviceId}. */
    public DeviceMesh subMesh(long deviceId, int[] dims) {
        if (dims.length == 0) {
            throw new IllegalArgumentException("a sub-mesh needs at least one dimension");
        }
        if (Arrays.stream(dims).distinct().count() != dims.length) {
            throw new IllegalArgumentException("sub-mesh dimensions must be distinct, got " + Arrays.toString(dims));
        }
        for (int d : dims) {
            checkDim(d);
        }
        int[] base = coordinates(deviceId);
        int[] subShape = new int[dims.length];
        List<String> subNames = new ArrayList<>();
        for (int i = 0; i < dims.length; i++) {
            subShape[i] = shape[dims[i]];
            if (!dimNames.isEmpty()) {
                subNames.add(dimNames.get(dims[i]));
            }
        }
        int total = Arrays.stream(subShape).reduce(1, (a, b) -> a * b);
        long[] subIds = new long[total];
        int[] sub = new int[dims.length];
        for (int flat = 0; flat < total; flat++) {
            int rest = flat;
            for (int i = dims.length - 1; i >= 0; i--) {
                sub[i] = rest % subShape[i];
                rest /= subShape[i];
            }
            int[] coords = base.clone();
            for (int i = 0; i < dims.length; i++) {
                coords[dims[i]] = sub[i];
            }
            subIds[flat] = deviceAt(coords);
        }
        return new DeviceMesh(kind, subShape, subIds, subNames);
    }

    /** The row-major index of {@code deviceId}, or -1 if it is not in the mesh. */
    public int indexOf(long deviceId) {
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] == deviceId) {
                return i;
            }
        }
        return -1;
    }

    private void checkDim(int dim) {
        if (dim < 0 || dim >= shape.length) {
            throw new IllegalArgumentException("mesh dimension " + dim + " is out of range for " + this);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o == this || o instanceof DeviceMesh m && m.hash == hash && m.kind == kind && Arrays.equals(m.shape, shape) && Arrays.equals(m.ids, ids)
            && m.dimNames.equals(dimNames);
    }

    @Override
    public int hashCode() {
        return hash;
    }

    /** True when both meshes hold the same devices in the same arrangement, whatever their dimension names. */
    public boolean sameDevicesAs(DeviceMesh other) {
        return other.kind == kind && Arrays.equals(other.shape, shape) && Arrays.equals(other.ids, ids);
    }

    /** Prints as {@code DeviceMesh(cpu, [[0, 1], [2, 3]], dims=[dp, tp])}. */
    @Override
    public String toString() {
        StringBuilder out = new StringBuilder("DeviceMesh(").append(kind.shortName()).append(", ");
        appendNested(out, 0, new int[] {0});
        if (!dimNames.isEmpty()) {
            out.append(", dims=").append(dimNames);
        }
        return out.append(')').toString();
    }

    private void appendNested(StringBuilder out, int dim, int[] next) {
        out.append('[');
        for (int i = 0; i < shape[dim]; i++) {
            if (i > 0) {
                out.append(", ");
            }
            if (dim == shape.length - 1) {
                out.append(ids[next[0]++]);
            } else {
                appendNested(out, dim + 1, next);
            }
        }
        out.append(']');
    }
}
