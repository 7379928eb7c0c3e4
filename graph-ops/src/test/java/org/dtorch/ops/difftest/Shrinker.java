package org.dtorch.ops.difftest;

import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;
import org.dtorch.core.distributed.Placement;

/**
 * Cuts a failing program down to a small one that still fails the same way: greedily drops steps (with every step that
 * reads what they make), then replicates inputs and moves, keeping each change under which the program still fails,
 * until no change helps or the budget of runs is spent. A shrunk program is 1-minimal in its steps: dropping any one
 * more makes it pass (or refuse on one device).
 *
 * <p>Stateless. Thread-safe.
 */
public final class Shrinker {
    private Shrinker() {
    }

    /** A smaller program on which {@code fails} holds, {@code program} itself when none is; at most {@code budget} tries. */
    public static Program shrink(Program program, Predicate<Program> fails, int budget) {
        Program best = program;
        int tries = 0;
        boolean changed = true;
        while (changed && tries < budget) {
            changed = false;
            for (int i = best.steps().size() - 1; i >= 0 && tries < budget; i--) {
                if (i >= best.steps().size()) {
                    continue;
                }
                Program candidate = best.without(Set.of(i));
                if (candidate.steps().isEmpty() || candidate.compared().isEmpty()) {
                    continue;
                }
                tries++;
                if (fails.test(candidate)) {
                    best = candidate;
                    changed = true;
                }
            }
            for (int i = 0; i < best.steps().size() && tries < budget; i++) {
                Step s = best.steps().get(i);
                Step simpler = simpler(best, s);
                if (simpler == null) {
                    continue;
                }
                tries++;
                Program candidate = best.with(i, simpler);
                if (fails.test(candidate)) {
                    best = candidate;
                    changed = true;
                }
            }
        }
        return best;
    }

    /** {@code s} with replicated placements, or null when it has none to replicate. */
    private static Step simpler(Program p, Step s) {
        if (s instanceof Source src && !allReplicated(src.placements())) {
            return src.with(replicated(src.placements().size()));
        }
        if (s instanceof Move m && !allReplicated(m.placements())) {
            return new Move(m.reads(), m.mesh(), replicated(m.placements().size()));
        }
        return null;
    }

    private static boolean allReplicated(List<Placement> ps) {
        return ps.stream().allMatch(Placement::isReplicate);
    }

    private static List<Placement> replicated(int n) {
        return Collections.nCopies(n, Placement.replicate());
    }
}
