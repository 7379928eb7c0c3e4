package org.dtorch.core.graph;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.RedistributionPlan;
import org.dtorch.core.distributed.RedistributionStep;
import org.dtorch.core.distributed.StepKind;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Writes a {@link GraphHistory.Window} as a Graphviz DOT digraph: one box per operator ({@code op<id>}: its label,
 * each output's dtype and shape, its mesh, and the steps of every redistribution it carries out), one edge per input
 * from the operator that made it, labelled with the tensor's placements ({@code S(0)R}). A tensor made before the
 * window is a dashed ellipse {@code t<operand id>}. Operators that communicate to redistribute are filled. Nodes come
 * in operator order, each followed by its incoming edges, so the text is the same for the same program.
 *
 * <p>Thread-safe: stateless.
 */
public final class GraphDot {
    private static final String COMMUNICATING = ", style=filled, fillcolor=\"#fde0c5\"";

    private GraphDot() {
    }

    /** The window as DOT text, ending in a newline. */
    public static String format(GraphHistory.Window window) {
        List<GraphHistory.RecordedOperator> operators = window.operators();
        StringBuilder out = new StringBuilder();
        out.append("// The logical graph of a DTorch program: the ").append(operators.size())
            .append(" operators added since the runtime started or the last dump");
        if (window.dropped() > 0) {
            out.append(" (").append(count(window.dropped(), "earlier one")).append(" not kept)");
        }
        out.append(".\n// Edges carry the placements of the tensor they pass.\n");
        out.append("digraph dtorch {\n  node [shape=box, fontname=\"monospace\"];\n  edge [fontname=\"monospace\"];\n");
        Map<Long, String> producers = new HashMap<>();
        Set<Long> earlier = new HashSet<>();
        for (GraphHistory.RecordedOperator op : operators) {
            for (Operand input : op.inputs()) {
                if (!producers.containsKey(input.id()) && earlier.add(input.id())) {
                    out.append("  t").append(input.id()).append(" [label=")
                        .append(quote("%" + input.id() + " (earlier)\n" + shape(input) + "\n" + input.meta().sharding().mesh()))
                        .append(", shape=ellipse, style=dashed];\n");
                }
            }
            String node = "op" + op.id();
            out.append("  ").append(node).append(" [label=").append(quote(String.join("\n", nodeLines(op))))
                .append(communicates(op) ? COMMUNICATING : "").append("];\n");
            for (Operand input : op.inputs()) {
                String from = producers.getOrDefault(input.id(), "t" + input.id());
                out.append("  ").append(from).append(" -> ").append(node).append(" [label=")
                    .append(quote(placements(input.meta().placements()))).append("];\n");
            }
            for (Operand output : op.outputs()) {
                producers.put(output.id(), node);
            }
        }
        return out.append("}\n").toString();
    }

    /** The label's lines: the operator, its outputs, its mesh, its redistribution steps. */
    private static List<String> nodeLines(GraphHistory.RecordedOperator op) {
        List<String> lines = new ArrayList<>();
        lines.add(op.label());
        for (Operand output : op.outputs()) {
            lines.add(shape(output));
        }
        lines.add(meshes(op));
        for (RedistributionPlan plan : op.plans()) {
            lines.addAll(steps(plan));
        }
        return lines;
    }

    private static String shape(Operand operand) {
        TensorMeta meta = operand.meta();
        return TorchTensors.dtypeName(meta.dtype()) + java.util.Arrays.toString(meta.shape());
    }

    /** The operator's mesh, or its operands' distinct meshes in order, inputs first, joined by arrows. */
    private static String meshes(GraphHistory.RecordedOperator op) {
        if (op.mesh() != null) {
            return op.mesh().toString();
        }
        List<DeviceMesh> distinct = new ArrayList<>();
        for (List<Operand> operands : List.of(op.inputs(), op.outputs())) {
            for (Operand operand : operands) {
                DeviceMesh mesh = operand.meta().sharding().mesh();
                if (distinct.stream().noneMatch(mesh::sameDevicesAs)) {
                    distinct.add(mesh);
                }
            }
        }
        return String.join(" -> ", distinct.stream().map(DeviceMesh::toString).toList());
    }

    /** {@code S(0)->R: all-gather on mesh dim 0}, one line per step; {@code no change} for the identity. */
    static List<String> steps(RedistributionPlan plan) {
        List<String> lines = new ArrayList<>();
        if (plan.throughDevice().isPresent()) {
            lines.add(plan.source().mesh().kind().shortName() + "->" + plan.target().mesh().kind().shortName()
                + ": through the cuda devices of the same ids");
        }
        for (RedistributionStep step : plan.sourceSteps()) {
            lines.add(step(step, ""));
        }
        plan.transfer().ifPresent(t -> lines.add("transfer to " + plan.target().mesh() + ": " + count(t.pieces().size(), "piece")));
        for (RedistributionStep step : plan.targetSteps()) {
            lines.add(step(step, " of the target"));
        }
        if (lines.isEmpty()) {
            lines.add(placements(plan.source().placements()) + "->" + placements(plan.target().placements()) + ": no change");
        }
        return lines;
    }

    private static String step(RedistributionStep step, String whichMesh) {
        return step.from() + "->" + step.to() + ": " + describe(step.kind()) + " on mesh dim " + step.meshDim() + whichMesh;
    }

    private static String describe(StepKind kind) {
        return switch (kind) {
            case ALL_TO_ALL -> "all-to-all";
            case ALL_GATHER -> "all-gather";
            case REDUCE_SCATTER -> "reduce-scatter";
            case ALL_REDUCE -> "all-reduce";
            case LOCAL_SLICE -> "local slice";
            case REPLICATE_TO_PARTIAL -> "local (one coordinate keeps the values)";
            case SHARD_TO_PARTIAL -> "local (shards padded with the identity)";
        };
    }

    /** True when one of the operator's redistributions runs a collective or moves between meshes or device kinds. */
    private static boolean communicates(GraphHistory.RecordedOperator op) {
        for (RedistributionPlan plan : op.plans()) {
            if (plan.transfer().isPresent() || plan.throughDevice().isPresent()
                || plan.allSteps().stream().anyMatch(s -> s.kind().communicates())) {
                return true;
            }
        }
        return false;
    }

    private static String count(long n, String thing) {
        return n + " " + thing + (n == 1 ? "" : "s");
    }

    /** The placements in the project's notation, one per mesh dimension without separators: {@code S(0)R}. */
    static String placements(List<Placement> placements) {
        StringBuilder out = new StringBuilder();
        for (Placement p : placements) {
            out.append(p);
        }
        return out.toString();
    }

    /**
     * {@code text} as a DOT quoted string: quotes and backslashes escaped, each newline Graphviz's centred line break
     * {@code \n}, other control characters a space.
     */
    static String quote(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2).append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                default -> out.append(c < 0x20 || c == 0x7f ? ' ' : c);
            }
        }
        return out.append('"').toString();
    }
}
