package org.dtorch.ops.difftest;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Prints a {@link Program} as a Python script for {@code ./dtorch run}: the inputs' values as literals, the program on
 * the runtime with the {@code dtorch} package, the same program with {@code torch} on whole tensors, and the comparison
 * of every compared value with the tolerances of {@link Tolerance}. The one device is the runtime's kind: the CPU, or
 * the first GPU for a CUDA mesh. A failure report carries this script, so the report is a reproduction: where the
 * runtime refused a step, the script raises there; where values differ, an assertion names the value.
 *
 * <p>Stateless. Thread-safe.
 */
public final class PythonRepro {
    private PythonRepro() {
    }

    /**
     * The script of {@code program} on meshes of {@code deviceType} ({@code "cpu"} or {@code "cuda"}); {@code found} says
     * what the run that printed it saw (a line of the docstring).
     */
    public static String print(Program program, String deviceType, String found) {
        StringBuilder py = new StringBuilder();
        py.append("\"\"\"A program of the differential tests (seed ").append(program.seed()).append("), on the runtime and on one device.\n");
        if (!found.isEmpty()) {
            py.append("\nFound: ").append(found.replace("\\", "\\\\").replace("\"\"\"", "'''")).append('\n');
        }
        py.append("\nRun it with: ./dtorch run repro.py\n\"\"\"\n\n");
        py.append(PRELUDE);
        for (int m = 0; m < program.meshes().size(); m++) {
            Program.MeshSpec mesh = program.meshes().get(m);
            py.append("m").append(m).append(" = DeviceMesh(\"").append(deviceType).append("\", ").append(nested(mesh.ids(), mesh.shape())).append(")\n");
        }
        py.append('\n');
        int[] first = program.firstOutputs();
        for (int i = 0; i < program.steps().size(); i++) {
            if (program.steps().get(i) instanceof Source s) {
                py.append("_x").append(first[i]).append(" = ").append(literal(s)).append('\n');
            }
        }
        py.append("\n# The program on the runtime.\n");
        appendSteps(py, program, first, true, deviceType);
        py.append("\n# The same program on one device.\n");
        appendSteps(py, program, first, false, deviceType);
        py.append('\n');
        // On CUDA the one device is the first GPU, as in ProgramRun; the comparison runs on the host.
        String host = deviceType.equals("cpu") ? "" : ".cpu()";
        for (int v : program.compared()) {
            py.append("_check(\"v").append(v).append("\", v").append(v).append(".to_torch()").append(host).append(", r").append(v).append(host)
                .append(")\n");
        }
        py.append("print(\"every value matches torch\")\n");
        return py.toString();
    }

    private static void appendSteps(StringBuilder py, Program program, int[] first, boolean distributed, String deviceType) {
        String prefix = distributed ? "v" : "r";
        for (int i = 0; i < program.steps().size(); i++) {
            Step s = program.steps().get(i);
            if (!distributed && s instanceof Source && !deviceType.equals("cpu")) {
                // The one device of a CUDA run is the first GPU, as in ProgramRun.
                py.append("r").append(first[i]).append(" = _x").append(first[i]).append(".to(\"").append(deviceType).append("\")\n");
                continue;
            }
            List<String> in = Arrays.stream(s.reads()).mapToObj(r -> prefix + r).toList();
            List<String> out = new ArrayList<>();
            for (int k = 0; k < s.outputs(); k++) {
                out.add(prefix + (first[i] + k));
            }
            py.append(s.python(in, out, distributed)).append('\n');
        }
    }

    /** The ids of a mesh as a nested Python list of its shape. */
    private static String nested(long[] ids, int[] shape) {
        if (shape.length == 1) {
            return Py.ints(ids);
        }
        List<String> rows = new ArrayList<>();
        int row = ids.length / shape[0];
        for (int r = 0; r < shape[0]; r++) {
            rows.add(nested(Arrays.copyOfRange(ids, r * row, (r + 1) * row), Arrays.copyOfRange(shape, 1, shape.length)));
        }
        return "[" + String.join(", ", rows) + "]";
    }

    /** The input's values: {@code torch.tensor([...], dtype=...).reshape([...])}. */
    static String literal(Source s) {
        String values;
        try (Tensor t = s.values(); Tensor flat = t.reshape(-1)) {
            String nestedValues = TorchTensors.format(flat, Integer.MAX_VALUE);
            values = s.dtype() == ScalarType.Bool
                ? Arrays.stream(nestedValues.substring(1, nestedValues.length() - 1).split(", ")).filter(x -> !x.isEmpty())
                    .map(x -> x.equals("1") ? "True" : "False").collect(Collectors.joining(", ", "[", "]"))
                : nestedValues;
        }
        return "torch.tensor(" + values + ", dtype=" + Py.dtype(s.dtype()) + ").reshape(" + Py.ints(s.shape()) + ")";
    }

    private static final String PRELUDE = """
        import dtorch
        import torch
        from dtorch import DeviceMesh, Partial, Replicate, Shard

        # The tolerances of the differential tests: (rtol, atol) per floating dtype; integers and bools must be equal.
        _TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (2e-2, 6e-2), torch.float16: (2e-3, 2e-3), torch.float64: (1e-4, 1e-4)}


        def _outs(result):
            return list(result) if isinstance(result, (list, tuple)) else [result]


        def _place(t, mesh, placements):
            if any(isinstance(p, Partial) for p in placements):
                whole = [Replicate() if isinstance(p, Partial) else p for p in placements]
                return dtorch.Tensor(t, device_mesh=mesh, placements=whole).redistribute(mesh, placements)
            return dtorch.Tensor(t, device_mesh=mesh, placements=placements)


        def _check(name, got, want):
            assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype, \\
                "%s: got %s %s, torch gives %s %s" % (name, got.dtype, tuple(got.shape), want.dtype, tuple(want.shape))
            if want.dtype not in _TOLERANCE:
                assert torch.equal(got, want), "%s: got %s, torch gives %s" % (name, got, want)
                return
            rtol, atol = _TOLERANCE[want.dtype]
            g, w = got.double(), want.double()
            finite = torch.isfinite(w)
            assert torch.equal(torch.isfinite(g), finite), "%s: non-finite values differ: got %s, torch gives %s" % (name, got, want)
            both = torch.isinf(w) & torch.isinf(g)
            assert torch.equal(g[both], w[both]), "%s: infinities differ: got %s, torch gives %s" % (name, got, want)
            scale = max(1.0, w.abs()[finite].max().item()) if bool(finite.any()) else 1.0
            close = (g - w).abs()[finite] <= (w.abs()[finite] * rtol + atol * scale)
            assert bool(close.all()), "%s: values differ: got %s, torch gives %s" % (name, got, want)


        """;
}
