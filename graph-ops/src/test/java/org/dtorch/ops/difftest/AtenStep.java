package org.dtorch.ops.difftest;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.ops.aten.AtenCall;

/**
 * An ATen operator through the generic path ({@code DTorch.aten}): the call {@code name} makes of arguments of the kinds
 * {@code key} ({@link AtenCall#of(String, String, Object...)}; tensors are null placeholders, a tensor list a list of
 * them), on the values {@code reads}. It makes {@code outputs} values (several for {@code split} or {@code max(dim)}).
 *
 * <p>Immutable. Thread-safe.
 */
public record AtenStep(String name, String key, List<Object> values, int[] reads, int outputs, boolean aliases) implements Step {
    public AtenStep {
        values = java.util.Collections.unmodifiableList(new ArrayList<>(values));
        reads = reads.clone();
    }

    @Override
    public int[] reads() {
        return reads.clone();
    }

    AtenCall call() {
        return AtenCall.of(name, key, values.toArray());
    }

    @Override
    public Step withReads(int[] others) {
        return new AtenStep(name, key, values, others, outputs, aliases);
    }

    @Override
    public List<DTensor> run(DTorch dt, List<DeviceMesh> meshes, List<DTensor> in) {
        return dt.aten(call(), in.toArray(DTensor[]::new));
    }

    @Override
    public List<Tensor> reference(List<Tensor> in) {
        return call().call(in);
    }

    @Override
    public String python(List<String> in, List<String> out, boolean distributed) {
        String[] parts = key.split("\\|", -1);
        List<String> kinds = parts[0].isEmpty() ? List.of() : List.of(parts[0].split(","));
        int[] next = {0};
        int v = 0;
        List<String> positional = new ArrayList<>();
        for (String kind : kinds) {
            positional.add(Py.argument(kind, values.get(v++), in, next));
        }
        List<String> keywords = new ArrayList<>();
        for (int p = 1; p < parts.length; p++) {
            int eq = parts[p].indexOf('=');
            String arg = Py.argument(parts[p].substring(eq + 1), values.get(v++), in, next);
            keywords.add((distributed ? "'" + parts[p].substring(0, eq) + "': " : parts[p].substring(0, eq) + "=") + arg);
        }
        String target = String.join(", ", out) + (out.size() == 1 ? "," : "") + " = _outs(";
        if (distributed) {
            String args = "(" + String.join(", ", positional) + (positional.size() == 1 ? ",)" : ")");
            return target + "dtorch.aten('" + name + "', " + args + (keywords.isEmpty() ? "" : ", {" + String.join(", ", keywords) + "}") + "))";
        }
        List<String> all = new ArrayList<>(positional);
        all.addAll(keywords);
        return target + "torch." + name + "(" + String.join(", ", all) + "))";
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof AtenStep a && name.equals(a.name) && key.equals(a.key) && values.equals(a.values) && Arrays.equals(reads, a.reads)
            && outputs == a.outputs;
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Arrays.hashCode(reads);
    }

    @Override
    public String toString() {
        return "aten " + name + "(" + key + ") " + values + " on " + Arrays.toString(reads);
    }
}
