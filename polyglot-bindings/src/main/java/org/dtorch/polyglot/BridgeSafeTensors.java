package org.dtorch.polyglot;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.SafeTensors;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.safetensors.SafeTensorsCheckpoint;
import org.dtorch.core.safetensors.SafeTensorsHeader;
import org.dtorch.core.safetensors.TensorEntry;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.polyglot.torch.PyTensor;
import org.graalvm.polyglot.Value;

/**
 * What {@link PyBridge} offers Python of {@link SafeTensors}: headers as rows, loads with explicit per-tensor layouts
 * (Python resolves a plan, a dict or a function, against the header's names first), saves of distributed tensors, and
 * the plain-torch loads and saves of the {@code torch} shim. An isolated script may neither read nor write a file
 * through them.
 *
 * <p>Thread-safe: the isolation flag is set by the host before the script runs and read by any thread; the rest is the
 * Python client thread's.
 */
final class BridgeSafeTensors {
    private final DTorch runtime;
    /** Set for an isolated script, which may touch no file, not even through the runtime. */
    private volatile boolean isolated;

    BridgeSafeTensors(DTorch runtime) {
        this.runtime = runtime;
    }

    void isolate() {
        isolated = true;
    }

    private void checkAllowed(String op, List<Path> paths) {
        if (isolated) {
            throw new SecurityException(op + ": a script run with --isolated may touch no file, and this would use " + paths);
        }
    }

    private static List<Path> paths(Value paths) {
        return BridgeArguments.strings(paths).stream().map(Path::of).toList();
    }

    /** {@link PyBridge#safetensorsHeader}: one row {@code [name, dtype, shape, file, begin, end]} per tensor, then the metadata. */
    Object[] header(Value pathsValue) {
        List<Path> paths = paths(pathsValue);
        checkAllowed("open_header", paths);
        SafeTensorsCheckpoint checkpoint = SafeTensorsCheckpoint.open(paths);
        List<Object> rows = new ArrayList<>();
        for (String name : checkpoint.names()) {
            SafeTensorsHeader header = checkpoint.headerOf(name);
            TensorEntry e = header.tensor(name);
            rows.add(new Object[] {name, TorchTensors.dtypeName(e.dtype().torch()), e.shape(), header.file().toString(), e.begin(), e.end()});
        }
        List<String> metadata = new ArrayList<>();
        checkpoint.metadata().forEach((k, v) -> {
            metadata.add(k);
            metadata.add(v);
        });
        return new Object[] {rows.toArray(), metadata.toArray(String[]::new)};
    }

    /**
     * {@link PyBridge#loadStateDict}: {@code layouts} holds one {@code [mesh, placements, shape or None]} per name;
     * {@code expected} the names that must be there (None when the plan was a function).
     */
    Object[] load(Value pathsValue, Value names, Value layouts, Value expected, boolean strict) {
        List<Path> paths = paths(pathsValue);
        checkAllowed("load_state_dict", paths);
        Map<String, SafeTensors.Layout> plan = new LinkedHashMap<>();
        List<String> keys = BridgeArguments.strings(names);
        for (int i = 0; i < keys.size(); i++) {
            Value layout = layouts.getArrayElement(i);
            if (!(layout.getArrayElement(0).isHostObject() && layout.getArrayElement(0).asHostObject() instanceof DeviceMesh mesh)) {
                throw new IllegalArgumentException("load_state_dict: the layout of '" + keys.get(i) + "' has no DeviceMesh");
            }
            Placement[] placements = BridgeArguments.placementArray(layout.getArrayElement(1));
            Value shape = layout.getArrayElement(2);
            SafeTensors.Layout l = SafeTensors.Layout.of(mesh, placements);
            plan.put(keys.get(i), shape.isNull() ? l : l.withShape(BridgeArguments.longs(shape)));
        }
        List<String> must = expected == null || expected.isNull() ? null : BridgeArguments.strings(expected);
        SafeTensors.Loaded loaded = SafeTensors.loadWithReport(runtime, paths, plan::get, must, strict);
        return new Object[] {loaded.tensors().keySet().toArray(String[]::new), loaded.tensors().values().toArray(DTensor[]::new),
            loaded.missing().toArray(String[]::new), loaded.unexpected().toArray(String[]::new)};
    }

    /** {@link PyBridge#saveStateDict}: the file written, or the index when {@code maxFileBytes > 0}. */
    String save(String path, Value names, Value tensors, Value metadata, long maxFileBytes) {
        checkAllowed("save_state_dict", List.of(Path.of(path)));
        List<String> keys = BridgeArguments.strings(names);
        Map<String, DTensor> state = new LinkedHashMap<>();
        for (int i = 0; i < keys.size(); i++) {
            Value v = tensors.getArrayElement(i);
            if (!(v.isHostObject() && v.asHostObject() instanceof DTensor t)) {
                throw new IllegalArgumentException("save_state_dict: '" + keys.get(i) + "' is not a dtorch.Tensor");
            }
            state.put(keys.get(i), t);
        }
        Map<String, String> meta = metadata(metadata);
        if (maxFileBytes > 0) {
            return SafeTensors.saveSharded(runtime, Path.of(path), state, meta, maxFileBytes).toString();
        }
        SafeTensors.save(runtime, Path.of(path), state, meta);
        return path;
    }

    /** {@link PyBridge#loadFile}: the names, then one torch tensor per name. */
    Object[] loadFile(Value pathsValue) {
        List<Path> paths = paths(pathsValue);
        checkAllowed("load_file", paths);
        Map<String, Tensor> host = SafeTensors.loadToHost(paths);
        String[] keys = host.keySet().toArray(String[]::new);
        PyTensor[] values = new PyTensor[keys.length];
        for (int i = 0; i < keys.length; i++) {
            values[i] = PyTensor.wrap(host.get(keys[i]));
        }
        return new Object[] {keys, values};
    }

    /** {@link PyBridge#saveFile}. */
    void saveFile(String path, Value names, Value tensors, Value metadata) {
        checkAllowed("save_file", List.of(Path.of(path)));
        List<String> keys = BridgeArguments.strings(names);
        Map<String, Tensor> host = new LinkedHashMap<>();
        try {
            for (int i = 0; i < keys.size(); i++) {
                Value v = tensors.getArrayElement(i);
                if (!(v.isHostObject() && v.asHostObject() instanceof PyTensor t)) {
                    throw new IllegalArgumentException("save_file: '" + keys.get(i) + "' is not a torch.Tensor");
                }
                host.put(keys.get(i), t.torch());
            }
            SafeTensors.saveFromHost(Path.of(path), host, metadata(metadata));
        } finally {
            host.values().forEach(Tensor::close);
        }
    }

    /** A flat {@code [key, value, key, value, ...]} list of strings as a map. */
    private static Map<String, String> metadata(Value flat) {
        List<String> items = BridgeArguments.strings(flat);
        Map<String, String> out = new LinkedHashMap<>();
        for (int i = 0; i + 1 < items.size(); i += 2) {
            out.put(items.get(i), items.get(i + 1));
        }
        return out;
    }
}
