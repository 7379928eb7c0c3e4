package org.dtorch.core.distributed;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.core.communication.ReduceOpType;
import org.dtorch.core.device.DeviceKind;

/**
 * Plans redistributions: from (source mesh, source placements) to (target mesh, target placements) for a
 * tensor of a given shape, as single-mesh-dimension steps (see {@link StepKind} for the table of steps and
 * their collectives). Plans are cached by their inputs; executing is the kernels' job.
 *
 * <p><b>Nested sharding.</b> When tensor dimension {@code d} is sharded over several mesh dimensions,
 * the layout splits it by the outer mesh dimension first ({@link ShardLayout}). Only the innermost of them
 * may gather or re-shard {@code d} in one step, and a new {@code S(d)} may only be added inside all existing
 * ones: any other order would concatenate or split the wrong elements (the silent corruption PyTorch's
 * users report). The planner never takes such a step; when one is needed it first undoes the inner ones.
 *
 * <p><b>Partial values of different reductions</b> on several mesh dimensions ({@code [P(product), P(sum)]}) do not
 * commute: a tensor's value reduces its inner mesh dimensions first. So a partial placement is created on a mesh
 * dimension only while no inner one holds a partial of another reduction, and reduced only once none does: the order
 * nested shards follow too.
 *
 * <p><b>Search.</b> The planner runs a shortest-path search over placement sequences, one mesh dimension
 * changing per step, each step costing the elements a device sends or receives (an all-gather costs its
 * output times {@code (n-1)/n}, an all-to-all and a reduce-scatter their input times {@code (n-1)/n}, an
 * all-reduce twice that; local steps almost nothing). So {@code S(i) -> S(j)} is one all-to-all, never a
 * detour through {@code R}, and the order of steps follows the nesting rule by construction.
 *
 * <p><b>Between meshes</b> (different devices, possibly a different number of them): partial values are
 * reduced on the source mesh ({@code P -> R}), a {@link CrossMeshTransfer} moves every target device's
 * slice, and partial placements of the target are re-created locally ({@code R -> P}).
 *
 * <p>Every request is checked before anything is planned: one placement per mesh dimension, shard
 * dimensions in range, no negative dimension, and no {@code P(avg)} target that would have to be created
 * (a dimension shorter than the mesh dimensions that split it is fine: some devices hold empty shards). Errors list both placement sequences.
 *
 * <p><b>Between device kinds</b> (a CPU mesh and a CUDA mesh of one runtime on CUDA): the plan is that between
 * the two meshes' CUDA twins, wrapped ({@link RedistributionPlan#throughDevice()}); the executor moves the input
 * to the GPU first, or the output to the host last, on each device.
 *
 * <p>Thread-safe: stateless apart from a concurrent cache.
 */
public final class RedistributionPlanner {
    private static final int CACHE_LIMIT = 4096;
    private static final double LOCAL_STEP_COST = 1e-3;
    /** A move whose placements change only on mesh dimensions of one device: less than any step, more than none. */
    private static final double RELABEL_COST = 1e-4;
    private static final double STEP_COST = 1.0;
    private static final Map<Key, RedistributionPlan> CACHE = new ConcurrentHashMap<>();

    private RedistributionPlanner() {
    }

    /** A plan's inputs; the shape as the array it is, hashed once. */
    private record Key(Sharding source, Sharding target, long[] shape, int hash) {
        Key(Sharding source, Sharding target, long[] shape) {
            this(source, target, shape, 31 * (31 * source.hashCode() + target.hashCode()) + Arrays.hashCode(shape));
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.hash == hash && Arrays.equals(k.shape, shape) && k.source.equals(source)
                && k.target.equals(target);
        }

        @Override
        public int hashCode() {
            return hash;
        }

        @Override
        public String toString() {
            return source + " -> " + target + " of " + Arrays.toString(shape);
        }
    }

    /**
     * The plan that moves a tensor of {@code globalShape} from {@code source} to {@code target}; cached.
     *
     * @throws IllegalArgumentException if the request is invalid or unsupported; nothing has moved
     */
    public static RedistributionPlan plan(Sharding source, Sharding target, long[] globalShape) {
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(target, "target");
        Objects.requireNonNull(globalShape, "globalShape");
        Key key = new Key(source, target, globalShape); // the caller's array for the lookup, a copy in the cache
        RedistributionPlan cached = CACHE.get(key);
        if (cached != null) {
            return cached;
        }
        RedistributionPlan plan = computePlan(source, target, globalShape);
        if (CACHE.size() >= CACHE_LIMIT) {
            CACHE.clear();
        }
        CACHE.put(new Key(source, target, globalShape.clone(), key.hash()), plan);
        return plan;
    }

    /**
     * What the cheapest move of a tensor of {@code globalShape} from {@code source} to {@code target} on one mesh
     * costs, in the measure the search minimises (elements a device sends or receives, plus a constant per collective;
     * 0 for equal placements, a small constant for placements that differ only on mesh dimensions of one device).
     * Operator strategies compare input placements with it.
     *
     * @throws IllegalArgumentException if the request is invalid, or the two shardings are on different devices
     */
    public static double cost(Sharding source, Sharding target, long[] globalShape) {
        if (!source.mesh().sameDevicesAs(target.mesh())) {
            throw new IllegalArgumentException("cost: " + source.mesh() + " and " + target.mesh() + " are different devices");
        }
        if (source.equals(target)) {
            return 0;
        }
        RedistributionPlan plan = plan(source, target, globalShape);
        if (plan.isIdentity()) {
            return RELABEL_COST; // only dimensions of one device change: no data moves, but the move is still an operator
        }
        ShardLayout before = ShardLayout.of(globalShape, source);
        double total = 0;
        for (RedistributionStep step : plan.sourceSteps()) {
            total += cost(step.kind(), source.mesh().size(step.meshDim()), before, step.after());
            before = step.after();
        }
        return total;
    }

    /** Number of cached plans; for tests and diagnostics. */
    public static int cachedPlanCount() {
        return CACHE.size();
    }

    private static RedistributionPlan computePlan(Sharding source, Sharding target, long[] shape) {
        String request = "redistribute " + Arrays.toString(shape) + " from " + source.placements() + " on " + source.mesh()
            + " to " + target.placements() + " on " + target.mesh();
        if (source.mesh().kind() != target.mesh().kind()) {
            return crossKindPlan(request, source, target, shape);
        }
        checkLayout(request, "source", shape, source);
        checkLayout(request, "target", shape, target);
        // A mesh dimension of one device splits nothing and sums nothing: whatever its placement, every device's local
        // tensor is the same. So such a dimension takes the target's placement for free, and the search runs from there
        // (PyTorch DTensor skips these dimensions the same way); when nothing else differs, the move is the identity.
        boolean sameMesh = source.mesh().sameDevicesAs(target.mesh());
        Sharding from = sameMesh ? withUnsplitDimensionsOf(source, target) : source;
        for (int i = 0; i < target.placements().size(); i++) {
            Placement to = target.placement(i);
            if (to instanceof Partial p && p.op() == ReduceOpType.AVG && !to.equals(sameMeshPlacement(from, target, i))) {
                throw new IllegalArgumentException("cannot " + request + ": target placement " + to + " on mesh dimension " + i
                    + " would have to be created from non-partial values, and P(avg) has no exact way to do that"
                    + " (only P(sum), P(max), P(min) and P(product) can be created)");
            }
        }
        if (sameMesh) {
            Sharding sameMeshTarget = new Sharding(source.mesh(), target.placements());
            return new RedistributionPlan(source, target, shape, search(request, shape, from, sameMeshTarget), null, List.of());
        }
        Sharding reducedSource = source.withPlacements(withoutPartial(source.placements()));
        Sharding reducedTarget = target.withPlacements(withoutPartial(target.placements()));
        List<RedistributionStep> before = search(request, shape, source, reducedSource);
        CrossMeshTransfer transfer = new CrossMeshTransfer(ShardLayout.of(shape, reducedSource), ShardLayout.of(shape, reducedTarget));
        List<RedistributionStep> after = search(request, shape, reducedTarget, target);
        return new RedistributionPlan(source, target, shape, before, transfer, after);
    }

    /** {@code source} with the target's placement on every mesh dimension of a single device. */
    private static Sharding withUnsplitDimensionsOf(Sharding source, Sharding target) {
        List<Placement> placements = null;
        for (int i = 0; i < source.placements().size(); i++) {
            if (source.mesh().size(i) == 1 && !source.placement(i).equals(target.placement(i))) {
                if (placements == null) {
                    placements = new ArrayList<>(source.placements());
                }
                placements.set(i, target.placement(i));
            }
        }
        return placements == null ? source : source.withPlacements(placements);
    }

    /**
     * A move between a CPU mesh and a CUDA mesh: the same request between their CUDA twins, which
     * the executor brackets with a device move. The CPU side never communicates, so a runtime on CUDA runs no CPU
     * collective and publishes no host value in its stores.
     */
    private static RedistributionPlan crossKindPlan(String request, Sharding source, Sharding target, long[] shape) {
        try {
            RedistributionPlan onDevice = plan(source.withKind(DeviceKind.CUDA), target.withKind(DeviceKind.CUDA), shape);
            return new RedistributionPlan(source, target, shape, onDevice);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("cannot " + request + ": between cpu and cuda devices the move runs on the cuda"
                + " devices of the same ids, and there: " + e.getMessage(), e);
        }
    }

    private static Placement sameMeshPlacement(Sharding source, Sharding target, int meshDim) {
        return source.mesh().sameDevicesAs(target.mesh()) ? source.placement(meshDim) : null;
    }

    private static List<Placement> withoutPartial(List<Placement> placements) {
        return placements.stream().map(p -> p.isPartial() ? (Placement) Placement.replicate() : p).toList();
    }

    private static void checkLayout(String request, String which, long[] shape, Sharding sharding) {
        String problem = ShardLayout.problem(shape, sharding);
        if (problem != null) {
            throw new IllegalArgumentException("cannot " + request + ": " + which + " " + problem);
        }
    }

    /** Dijkstra over placement sequences of one mesh. */
    private static List<RedistributionStep> search(String request, long[] shape, Sharding from, Sharding to) {
        if (from.placements().equals(to.placements())) {
            return List.of();
        }
        DeviceMesh mesh = from.mesh();
        List<Placement> candidates = candidates(shape.length, from, to);
        Map<List<Placement>, Double> best = new HashMap<>();
        Map<List<Placement>, RedistributionStep> via = new HashMap<>();
        Map<List<Placement>, List<Placement>> previous = new HashMap<>();
        record Entry(List<Placement> state, double cost) {
        }

        PriorityQueue<Entry> queue = new PriorityQueue<>((a, b) -> Double.compare(a.cost(), b.cost()));
        best.put(from.placements(), 0.0);
        queue.add(new Entry(from.placements(), 0.0));
        while (!queue.isEmpty()) {
            Entry entry = queue.poll();
            if (entry.cost() > best.getOrDefault(entry.state(), Double.MAX_VALUE)) {
                continue;
            }
            if (entry.state().equals(to.placements())) {
                return path(to.placements(), via, previous);
            }
            ShardLayout layout = ShardLayout.of(shape, new Sharding(mesh, entry.state()));
            for (int i = 0; i < mesh.ndim(); i++) {
                for (Placement next : candidates) {
                    StepKind kind = stepKind(entry.state(), i, next);
                    if (kind == null) {
                        continue;
                    }
                    List<Placement> state = new ArrayList<>(entry.state());
                    state.set(i, next);
                    Sharding sharding = new Sharding(mesh, state);
                    if (ShardLayout.problem(shape, sharding) != null) {
                        continue;
                    }
                    ShardLayout after = ShardLayout.of(shape, sharding);
                    double cost = entry.cost() + cost(kind, mesh.size(i), layout, after);
                    List<Placement> key = List.copyOf(state);
                    if (cost < best.getOrDefault(key, Double.MAX_VALUE)) {
                        best.put(key, cost);
                        via.put(key, new RedistributionStep(i, entry.state().get(i), next, kind, after));
                        previous.put(key, entry.state());
                        queue.add(new Entry(key, cost));
                    }
                }
            }
        }
        throw new IllegalArgumentException("cannot " + request + ": no sequence of steps reaches " + to.placements() + " from "
            + from.placements());
    }

    private static List<RedistributionStep> path(List<Placement> end, Map<List<Placement>, RedistributionStep> via,
                                                 Map<List<Placement>, List<Placement>> previous) {
        List<RedistributionStep> steps = new ArrayList<>();
        List<Placement> state = end;
        while (via.containsKey(state)) {
            steps.add(via.get(state));
            state = previous.get(state);
        }
        Collections.reverse(steps);
        return steps;
    }

    /** The placements a mesh dimension may take on the way: R, S(d) for every d, and the partials named at either end. */
    private static List<Placement> candidates(int tensorDims, Sharding from, Sharding to) {
        Set<Placement> all = new LinkedHashSet<>();
        all.add(Placement.replicate());
        for (int d = 0; d < tensorDims; d++) {
            all.add(Placement.shard(d));
        }
        for (Placement p : from.placements()) {
            if (p.isPartial()) {
                all.add(p);
            }
        }
        for (Placement p : to.placements()) {
            if (p.isPartial()) {
                all.add(p);
            }
        }
        return List.copyOf(all);
    }

    /** The kind of the step that changes mesh dimension {@code i} of {@code state} to {@code next}, or null if none is allowed. */
    static StepKind stepKind(List<Placement> state, int i, Placement next) {
        Placement current = state.get(i);
        if (current.equals(next)) {
            return null;
        }
        boolean createsPartial = next instanceof Partial p && p.op() != ReduceOpType.AVG;
        if (next instanceof Partial created && !noInnerPartialOtherThan(state, i, created.op())
            || current instanceof Partial reduced && !noInnerPartialOtherThan(state, i, reduced.op())) {
            return null;
        }
        return switch (current) {
            case Shard s -> {
                if (!innermostShard(state, i, s.dim())) {
                    yield null;
                }
                StepKind kind = switch (next) {
                    case Replicate r -> StepKind.ALL_GATHER;
                    case Shard t -> noInnerShard(state, i, t.dim()) ? StepKind.ALL_TO_ALL : null;
                    case Partial p -> createsPartial ? StepKind.SHARD_TO_PARTIAL : null;
                };
                yield kind;
            }
            case Replicate r -> switch (next) {
                case Shard t -> noInnerShard(state, i, t.dim()) ? StepKind.LOCAL_SLICE : null;
                case Partial p -> createsPartial ? StepKind.REPLICATE_TO_PARTIAL : null;
                case Replicate same -> null;
            };
            case Partial p -> switch (next) {
                case Replicate r -> StepKind.ALL_REDUCE;
                case Shard t -> noInnerShard(state, i, t.dim()) ? StepKind.REDUCE_SCATTER : null;
                case Partial other -> null;
            };
        };
    }

    /**
     * True when no mesh dimension after {@code i} is partial with a reduction other than {@code op}. Partial values of
     * different reductions do not commute (the sum of products is not the product of sums), so a tensor's value reduces
     * its inner mesh dimensions first; a partial placement is therefore created on mesh dimension {@code i} only before,
     * and reduced only after, any inner one of another reduction, as nested shards are split outer first.
     */
    private static boolean noInnerPartialOtherThan(List<Placement> state, int i, ReduceOpType op) {
        for (int j = i + 1; j < state.size(); j++) {
            if (state.get(j) instanceof Partial q && q.op() != op) {
                return false;
            }
        }
        return true;
    }

    /** True when no mesh dimension after {@code i} shards tensor dimension {@code dim}. */
    private static boolean innermostShard(List<Placement> state, int i, int dim) {
        return noInnerShard(state, i, dim);
    }

    private static boolean noInnerShard(List<Placement> state, int i, int dim) {
        for (int j = i + 1; j < state.size(); j++) {
            if (state.get(j).isShard(dim)) {
                return false;
            }
        }
        return true;
    }

    /** Elements one device sends or receives in a step; local steps cost almost nothing. */
    private static double cost(StepKind kind, int n, ShardLayout before, ShardLayout after) {
        double factor = (n - 1) / (double) n;
        double in = maxLocalNumel(before);
        double out = maxLocalNumel(after);
        return switch (kind) {
            case ALL_GATHER -> STEP_COST + out * factor;
            case ALL_TO_ALL, REDUCE_SCATTER -> STEP_COST + in * factor;
            case ALL_REDUCE -> STEP_COST + 2 * in * factor;
            case LOCAL_SLICE, REPLICATE_TO_PARTIAL, SHARD_TO_PARTIAL -> LOCAL_STEP_COST * (1 + out * 1e-6);
        };
    }

    private static double maxLocalNumel(ShardLayout layout) {
        long max = 0;
        for (long device : layout.sharding().mesh().deviceIds()) {
            max = Math.max(max, layout.localNumel(device));
        }
        return max;
    }
}
