package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.RedistributionPlanner;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.TensorMeta;

/**
 * The choice of placements shared by the strategies that list, per mesh dimension, the ways an operator can run
 * ({@link Option}: a placement for every input and the output's): of every combination over the mesh dimensions, the
 * one whose moves of the inputs the {@link RedistributionPlanner} prices lowest ({@link RedistributionPlanner#cost}),
 * as PyTorch DTensor picks the strategy of least redistribution cost.
 *
 * <p>Inputs that already fit a combination never move: that combination is looked for first and costs nothing, so an
 * operator whose inputs fit pays one pass over the options and no planning. On ties the earlier option wins, so a
 * family lists its cheapest-to-run option first ({@code R} before a shard, a kept partial value last).
 *
 * <p>Stateless. Thread-safe.
 */
final class OptionSearch {
    /** Past this many combinations the search improves one mesh dimension at a time instead of trying them all. */
    private static final long EXHAUSTIVE_LIMIT = 4096;

    private OptionSearch() {
    }

    /** One way to run on one mesh dimension: the placement every input needs there, and the output's. */
    record Option(List<Placement> inputs, Placement output) {
        Option {
            inputs = List.copyOf(inputs);
        }
    }

    /**
     * The cheapest combination of {@code options} (one list per mesh dimension) for {@code inputs}, with {@code outputs}
     * outputs of the same placements.
     *
     * @throws IllegalArgumentException naming {@code op} when no combination gives the inputs a layout they can have
     */
    static ShardingStrategy.Decision cheapest(String op, List<TensorMeta> inputs, List<List<Option>> options, int outputs) {
        return cheapest(op, inputs, options, outputs, -1);
    }

    /**
     * As {@link #cheapest(String, List, List, int)}, but where {@code pinned >= 0} only the options that leave input
     * {@code pinned} as it is and give the output its placements: an in-place operator writes its result into that input.
     *
     * @throws IllegalArgumentException as the other form, and when no option keeps the pinned input
     */
    static ShardingStrategy.Decision cheapest(String op, List<TensorMeta> inputs, List<List<Option>> options, int outputs, int pinned) {
        if (pinned >= 0) {
            List<List<Option>> kept = new ArrayList<>(options.size());
            for (int m = 0; m < options.size(); m++) {
                Placement own = inputs.get(pinned).placement(m);
                kept.add(options.get(m).stream().filter(o -> o.inputs().get(pinned).equals(own) && o.output().equals(own)).toList());
            }
            options = kept;
        }
        int[] fit = fitting(inputs, options);
        if (fit != null) {
            return decision(options, fit, inputs.size(), outputs);
        }
        Costs costs = new Costs(inputs);
        long combinations = 1;
        for (List<Option> o : options) {
            combinations = Math.multiplyExact(combinations, Math.max(1, o.size()));
            if (o.isEmpty()) {
                throw new IllegalArgumentException(op + ": no placement of " + MatmulStrategy.shapes(inputs) + " fits on mesh "
                    + inputs.getFirst().sharding().mesh());
            }
        }
        int[] best = combinations <= EXHAUSTIVE_LIMIT ? exhaustive(options, costs) : descent(options, costs);
        if (best == null) {
            throw new IllegalArgumentException(op + ": no placement of " + MatmulStrategy.shapes(inputs) + " fits on mesh "
                + inputs.getFirst().sharding().mesh());
        }
        return decision(options, best, inputs.size(), outputs);
    }

    /** Per mesh dimension, the option that leaves every input as it is there, or null when one dimension has none. */
    private static int[] fitting(List<TensorMeta> inputs, List<List<Option>> options) {
        int[] choice = new int[options.size()];
        for (int m = 0; m < options.size(); m++) {
            choice[m] = -1;
            List<Option> dim = options.get(m);
            for (int k = 0; k < dim.size() && choice[m] < 0; k++) {
                if (fits(inputs, dim.get(k), m)) {
                    choice[m] = k;
                }
            }
            if (choice[m] < 0) {
                return null;
            }
        }
        return choice;
    }

    private static boolean fits(List<TensorMeta> inputs, Option option, int m) {
        for (int i = 0; i < inputs.size(); i++) {
            if (!inputs.get(i).placement(m).equals(option.inputs().get(i))) {
                return false;
            }
        }
        return true;
    }

    private static int[] exhaustive(List<List<Option>> options, Costs costs) {
        int[] choice = new int[options.size()];
        int[] best = null;
        double bestCost = Double.MAX_VALUE;
        do {
            double cost = costs.of(options, choice);
            if (cost < bestCost) {
                bestCost = cost;
                best = choice.clone();
            }
        } while (bestCost > 0 && next(choice, options));
        return best;
    }

    /** Coordinate descent: from the first options, the best option of one mesh dimension at a time, until none improves. */
    private static int[] descent(List<List<Option>> options, Costs costs) {
        int[] choice = new int[options.size()];
        double current = costs.of(options, choice);
        boolean improved = true;
        while (improved) {
            improved = false;
            for (int m = 0; m < choice.length; m++) {
                int keep = choice[m];
                for (int k = 0; k < options.get(m).size(); k++) {
                    choice[m] = k;
                    double cost = costs.of(options, choice);
                    if (cost < current) {
                        current = cost;
                        keep = k;
                        improved = true;
                    }
                }
                choice[m] = keep;
            }
        }
        return current == Double.MAX_VALUE ? null : choice;
    }

    /** Advances {@code choice} like an odometer; false after the last combination. */
    static boolean next(int[] choice, List<? extends List<?>> options) {
        for (int m = choice.length - 1; m >= 0; m--) {
            if (++choice[m] < options.get(m).size()) {
                return true;
            }
            choice[m] = 0;
        }
        return false;
    }

    /** The placements of input {@code input} under {@code choice}. */
    static List<Placement> targets(List<List<Option>> options, int[] choice, int input) {
        List<Placement> out = new ArrayList<>(choice.length);
        for (int m = 0; m < choice.length; m++) {
            out.add(options.get(m).get(choice[m]).inputs().get(input));
        }
        return out;
    }

    private static ShardingStrategy.Decision decision(List<List<Option>> options, int[] choice, int inputs, int outputs) {
        List<List<Placement>> in = new ArrayList<>(inputs);
        for (int i = 0; i < inputs; i++) {
            in.add(targets(options, choice, i));
        }
        List<Placement> out = new ArrayList<>(choice.length);
        for (int m = 0; m < choice.length; m++) {
            out.add(options.get(m).get(choice[m]).output());
        }
        return new ShardingStrategy.Decision(in, Collections.nCopies(outputs, out));
    }

    /** The planner's price of moving every input to a combination's placements, remembered per input and target. */
    private static final class Costs {
        private final List<TensorMeta> inputs;
        private final List<Map<List<Placement>, Double>> known = new ArrayList<>();

        Costs(List<TensorMeta> inputs) {
            this.inputs = inputs;
            for (int i = 0; i < inputs.size(); i++) {
                known.add(new HashMap<>());
            }
        }

        /** The total; MAX_VALUE where some input cannot have its target layout. */
        double of(List<List<Option>> options, int[] choice) {
            double total = 0;
            for (int i = 0; i < inputs.size(); i++) {
                double c = of(i, targets(options, choice, i));
                if (c == Double.MAX_VALUE) {
                    return Double.MAX_VALUE;
                }
                total += c;
            }
            return total;
        }

        private double of(int input, List<Placement> target) {
            TensorMeta t = inputs.get(input);
            if (target.equals(t.placements())) {
                return 0;
            }
            return known.get(input).computeIfAbsent(target, p -> {
                try {
                    return RedistributionPlanner.cost(t.sharding(), new Sharding(t.sharding().mesh(), p), t.shape());
                } catch (IllegalArgumentException e) {
                    return Double.MAX_VALUE;
                }
            });
        }
    }
}
