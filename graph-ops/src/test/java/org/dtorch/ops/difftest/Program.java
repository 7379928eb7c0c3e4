package org.dtorch.ops.difftest;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;

/**
 * A random program: the meshes it uses and its steps in order. Values are numbered in the order steps make them (a step
 * of {@code k} outputs makes {@code k} consecutive numbers; a write makes none), and steps read values by number. A
 * program is a value: {@link ProgramRun} runs it op by op against any runtime, {@link Shrinker} cuts it down, and
 * {@link PythonRepro} prints it as a script. {@code seed} is the seed the {@link ProgramGenerator} drew it from.
 *
 * <p>Immutable. Thread-safe.
 */
public record Program(long seed, List<MeshSpec> meshes, List<Step> steps) {
    public Program {
        meshes = List.copyOf(meshes);
        steps = List.copyOf(steps);
    }

    /** A mesh of the program: its shape and its device ids in row-major order. */
    public record MeshSpec(int[] shape, long[] ids) {
        public MeshSpec {
            shape = shape.clone();
            ids = ids.clone();
        }

        DeviceMesh on(DTorch dt) {
            return DeviceMesh.of(dt.deviceKind(), shape, ids, List.of());
        }

        @Override
        public int[] shape() {
            return shape.clone();
        }

        @Override
        public long[] ids() {
            return ids.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof MeshSpec m && Arrays.equals(shape, m.shape) && Arrays.equals(ids, m.ids);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(shape) * 31 + Arrays.hashCode(ids);
        }

        @Override
        public String toString() {
            return Arrays.toString(shape) + " of " + Arrays.toString(ids);
        }
    }

    /** The number of each step's first output. */
    int[] firstOutputs() {
        int[] first = new int[steps.size()];
        int next = 0;
        for (int i = 0; i < steps.size(); i++) {
            first[i] = next;
            next += steps.get(i).outputs();
        }
        return first;
    }

    int valueCount() {
        return steps.stream().mapToInt(Step::outputs).sum();
    }

    /**
     * The values compared at the end: those no later step reads (the program's results) and those a write changed.
     */
    List<Integer> compared() {
        Set<Integer> read = new HashSet<>();
        Set<Integer> out = new TreeSet<>();
        for (Step s : steps) {
            for (int r : s.reads()) {
                read.add(r);
            }
            if (s.writes()) {
                out.add(s.reads()[0]);
            }
        }
        for (int v = 0; v < valueCount(); v++) {
            if (!read.contains(v)) {
                out.add(v);
            }
        }
        return List.copyOf(out);
    }

    /** This program without the steps {@code drop} and every step that reads what they make, the values renumbered. */
    Program without(Set<Integer> drop) {
        int[] first = firstOutputs();
        int[] renumber = new int[valueCount()];
        Arrays.fill(renumber, -1);
        List<Step> kept = new ArrayList<>();
        int next = 0;
        for (int i = 0; i < steps.size(); i++) {
            Step s = steps.get(i);
            int[] reads = s.reads();
            boolean gone = drop.contains(i);
            for (int k = 0; k < reads.length && !gone; k++) {
                gone = renumber[reads[k]] < 0;
                reads[k] = renumber[reads[k]];
            }
            if (gone) {
                continue;
            }
            for (int k = 0; k < s.outputs(); k++) {
                renumber[first[i] + k] = next++;
            }
            kept.add(s.withReads(reads));
        }
        return new Program(seed, meshes, kept);
    }

    /** This program with step {@code i} replaced by {@code s} (of the same outputs). */
    Program with(int i, Step s) {
        List<Step> changed = new ArrayList<>(steps);
        changed.set(i, s);
        return new Program(seed, meshes, changed);
    }

    /** The program, one step a line, with the numbers of the values each makes. */
    public String describe() {
        StringBuilder out = new StringBuilder("program of seed " + seed + " on meshes " + meshes + ":\n");
        int[] first = firstOutputs();
        for (int i = 0; i < steps.size(); i++) {
            Step s = steps.get(i);
            out.append("  ");
            for (int k = 0; k < s.outputs(); k++) {
                out.append(k > 0 ? ", " : "").append('v').append(first[i] + k);
            }
            out.append(s.outputs() > 0 ? " = " : "").append(s).append('\n');
        }
        return out.toString();
    }
}
