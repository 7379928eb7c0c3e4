package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * Operators that join a list of tensors into one ({@code cat}, {@code stack}, {@code hstack}, {@code vstack}, ...) or
 * cut one tensor into a list ({@code split}, {@code chunk}, {@code unbind}, {@code tensor_split}, ...). Every element
 * is copied, never combined, so along every dimension but the joined or cut one the output lines up with the inputs:
 * <ul>
 *   <li>a shard on such a dimension stays a shard, at the output dimension it becomes ({@code stack} shifts the
 *       dimensions at and after the new one, {@code unbind} those after the removed one, {@code vstack} puts a
 *       vector's only dimension second); joined inputs must all be sharded on it alike;</li>
 *   <li>the joined or cut dimension itself must be whole on every device, so a shard there is gathered first;</li>
 *   <li>a partial placement passes through when every joined input has the same one (the join of partial values is
 *       the partial value of the join).</li>
 * </ul>
 * Per mesh dimension the candidates are {@code R}, each shard some input has on a dimension that may stay sharded,
 * and the inputs' common partial placement; of every combination over the mesh dimensions, the one whose moves of
 * the inputs cost least by the {@link RedistributionPlanner}'s measure wins (the earlier candidate on ties, so inputs
 * already alike never move). {@code tensor_split} with a tensor of indices is refused by the call on meta tensors: its
 * number of outputs depends on the tensor's values.
 *
 * <p>Stateless. Thread-safe.
 */
final class ConcatSplitStrategy implements ShardingStrategy {
    static final ConcatSplitStrategy INSTANCE = new ConcatSplitStrategy();

    /** Operators that join a tensor list into one tensor. */
    static final Set<String> JOINS = Set.of("cat", "concat", "concatenate", "stack", "hstack", "vstack", "row_stack", "dstack",
        "column_stack");
    /** Operators that cut one tensor into a tensor list. */
    static final Set<String> SPLITS = Set.of("split", "split_with_sizes", "chunk", "unbind", "tensor_split", "hsplit", "vsplit",
        "dsplit");

    private ConcatSplitStrategy() {
    }

    @Override
    public String family() {
        return "concat-split";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; S on a dimension other than the one joined or cut, alike for every joined input; "
            + "the same P for every joined input";
    }

    /**
     * For each input (the list of a join, {@code self} of a cut), the output dimension each of its dimensions becomes,
     * or -1 for the dimension joined or cut (or one that has no counterpart).
     */
    private static List<int[]> dimensionMaps(AtenCall call, List<TensorMeta> inputs) {
        String name = call.overload().name();
        if (SPLITS.contains(name)) {
            int n = inputs.getFirst().ndim();
            int d = switch (name) {
                case "hsplit" -> n == 1 ? 0 : 1;
                case "vsplit" -> 0;
                case "dsplit" -> 2;
                default -> Rules.normalizeDim(name, dimParam(call), n);
            };
            int[] map = identity(n, d);
            if (name.equals("unbind")) {
                for (int j = d + 1; j < n; j++) {
                    map[j] = j - 1;
                }
            }
            return List.of(map);
        }
        int outNdim = inputs.stream().mapToInt(TensorMeta::ndim).max().orElse(0);
        List<int[]> maps = new ArrayList<>();
        for (TensorMeta t : inputs) {
            int n = t.ndim();
            maps.add(switch (name) {
                case "stack" -> {
                    int d = Rules.normalizeDim(name, dimParam(call), n + 1);
                    int[] map = identity(n, -1);
                    for (int j = d; j < n; j++) {
                        map[j] = j + 1;
                    }
                    yield map;
                }
                case "hstack" -> identity(n, inputs.getFirst().ndim() <= 1 ? 0 : 1);
                case "vstack", "row_stack" -> n == 1 ? new int[] {1} : identity(n, 0);
                case "dstack" -> n == 1 ? new int[] {1} : identity(n, 2);
                case "column_stack" -> identity(n, 1);
                default -> n == outNdim ? identity(n, Rules.normalizeDim(name, dimParam(call), n)) : unaligned(n);
            });
        }
        return maps;
    }

    /** Dimension {@code j} becomes {@code j}, except {@code cut} (if in range), which becomes -1. */
    private static int[] identity(int n, int cut) {
        int[] map = new int[n];
        for (int j = 0; j < n; j++) {
            map[j] = j == cut ? -1 : j;
        }
        return map;
    }

    /** A dimension map with no counterparts: {@code cat} skips 1-D empty inputs of other ranks, which stay whole. */
    private static int[] unaligned(int n) {
        int[] map = new int[n];
        Arrays.fill(map, -1);
        return map;
    }

    private static int dimParam(AtenCall call) {
        Object dim = call.constant("dim");
        return dim == null ? 0 : Math.toIntExact((Long) dim);
    }

    /**
     * {@inheritDoc} A join's inputs are checked against each other first (the call on meta tensors), so that a
     * concatenation of mismatched shapes fails before any input moves.
     */
    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        List<int[]> maps = dimensionMaps(call, inputs);
        if (JOINS.contains(call.overload().name())) {
            MetaInference.infer(call, inputs, this);
        }
        int meshDims = inputs.getFirst().placements().size();
        List<List<Placement>> perMeshDim = new ArrayList<>();
        for (int m = 0; m < meshDims; m++) {
            perMeshDim.add(candidates(inputs, maps, m));
        }
        List<Placement> best = null; // the first combination, R everywhere, always fits
        double bestCost = Double.POSITIVE_INFINITY;
        for (List<Placement> out : combinations(perMeshDim)) {
            List<List<Placement>> in = inputPlacements(inputs, maps, out);
            double cost = in == null ? Double.POSITIVE_INFINITY : cost(inputs, in);
            if (best == null || cost < bestCost) {
                best = out;
                bestCost = cost;
            }
        }
        return new Decision(inputPlacements(inputs, maps, best), Collections.nCopies(outputs, best));
    }

    /** Mesh dimension {@code m}'s candidates for the output: R, the shards the inputs can keep, their common partial. */
    private static List<Placement> candidates(List<TensorMeta> inputs, List<int[]> maps, int m) {
        Set<Placement> out = new LinkedHashSet<>();
        out.add(Placement.replicate());
        Placement first = inputs.getFirst().placement(m);
        if (first.isPartial() && inputs.stream().allMatch(t -> t.placement(m).equals(first))) {
            out.add(first);
        }
        for (int i = 0; i < inputs.size(); i++) {
            int j = Rules.shardDim(inputs.get(i).placement(m));
            if (j >= 0 && maps.get(i)[j] >= 0) {
                out.add(Placement.shard(maps.get(i)[j]));
            }
        }
        return List.copyOf(out);
    }

    private static List<List<Placement>> combinations(List<List<Placement>> perMeshDim) {
        List<List<Placement>> all = List.of(List.of());
        for (List<Placement> options : perMeshDim) {
            List<List<Placement>> next = new ArrayList<>();
            for (List<Placement> prefix : all) {
                for (Placement p : options) {
                    List<Placement> longer = new ArrayList<>(prefix);
                    longer.add(p);
                    next.add(longer);
                }
            }
            all = next;
        }
        return all;
    }

    /**
     * The placements each input needs for the output to have {@code out}, or null when a joined input has no
     * dimension for one of its shards or cannot be split that way.
     */
    private static List<List<Placement>> inputPlacements(List<TensorMeta> inputs, List<int[]> maps, List<Placement> out) {
        List<List<Placement>> in = new ArrayList<>();
        for (int i = 0; i < inputs.size(); i++) {
            List<Placement> ps = new ArrayList<>();
            for (Placement p : out) {
                if (p.isReplicate()) {
                    ps.add(Placement.replicate());
                } else if (p.isPartial()) {
                    ps.add(p);
                } else {
                    int j = indexOf(maps.get(i), Rules.shardDim(p));
                    if (j < 0) {
                        return null;
                    }
                    ps.add(Placement.shard(j));
                }
            }
            if (ShardLayout.problem(inputs.get(i).shape(), new Sharding(inputs.get(i).sharding().mesh(), ps)) != null) {
                return null;
            }
            in.add(ps);
        }
        return in;
    }

    private static int indexOf(int[] map, int outDim) {
        for (int j = 0; j < map.length; j++) {
            if (map[j] == outDim) {
                return j;
            }
        }
        return -1;
    }

    private static double cost(List<TensorMeta> inputs, List<List<Placement>> targets) {
        double total = 0;
        for (int i = 0; i < inputs.size(); i++) {
            TensorMeta t = inputs.get(i);
            total += RedistributionPlanner.cost(t.sharding(), new Sharding(t.sharding().mesh(), targets.get(i)), t.shape());
        }
        return total;
    }
}
