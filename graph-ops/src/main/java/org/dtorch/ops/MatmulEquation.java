package org.dtorch.ops;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.aten.AtenCall;

/**
 * A matrix product as an einsum equation: one label per dimension of every input and of the output. A label the
 * output lacks is contracted (summed over). Upper-case labels are broadcast batch dimensions ({@code matmul}'s): an
 * input may hold them at size 1. The added input ({@code linear}'s bias, {@code self} of {@code addmm},
 * {@code baddbmm}, {@code addmv}) carries the output's trailing labels and may be broadcast along any of them.
 *
 * <pre>
 *   mm        mk,kn->mn          dot      k,k->          addmm    mn+mk,kn->mn
 *   bmm       bmk,bkn->bmn       mv       mk,k->m        baddbmm  bmn+bmk,bkn->bmn
 *   outer     m,n->mn            matmul   ..mk,..kn->..mn (1-D operands lose m or n)
 *   linear    ..k,nk->..n (+ bias n; weight [in]: ..k,k->..)  addmv    m+mk,k->m
 *   einsum    its own equation, {@code ...} as batch labels
 * </pre>
 *
 * @param inputs the labels of each input's dimensions, in input order
 * @param output the labels of the output's dimensions
 * @param added  the index of the added input, or -1
 * @param sizes  each label's full size
 *
 * <p>Made and checked by {@link #of}, then only read: one per decision, on the calling thread.
 */
record MatmulEquation(List<String> inputs, String output, int added, Map<Character, Long> sizes) {

    /** The equation of {@code call} on inputs of these shapes, checked against them. */
    static MatmulEquation of(AtenCall call, List<TensorMeta> inputs) {
        String name = call.overload().name();
        int[] nd = inputs.stream().mapToInt(TensorMeta::ndim).toArray();
        List<String> labels = new ArrayList<>();
        String output;
        int added = -1;
        switch (name) {
            case "mm" -> output = factors(call, inputs, labels, 2, "mk", 2, "kn", "mn");
            case "bmm" -> output = factors(call, inputs, labels, 3, "bmk", 3, "bkn", "bmn");
            case "dot" -> output = factors(call, inputs, labels, 1, "k", 1, "k", "");
            case "mv" -> output = factors(call, inputs, labels, 2, "mk", 1, "k", "m");
            case "outer", "ger" -> output = factors(call, inputs, labels, 1, "m", 1, "n", "mn");
            case "addmm", "baddbmm", "addmv" -> {
                added = 0;
                List<TensorMeta> rest = inputs.subList(1, inputs.size());
                output = switch (name) {
                    case "addmm" -> factors(call, rest, labels, 2, "mk", 2, "kn", "mn");
                    case "baddbmm" -> factors(call, rest, labels, 3, "bmk", 3, "bkn", "bmn");
                    default -> factors(call, rest, labels, 2, "mk", 1, "k", "m");
                };
                labels.addFirst(addedLabels(call, inputs, nd[0], output));
            }
            case "linear" -> {
                if (nd[0] < 1 || nd[1] < 1 || nd[1] > 2) {
                    throw misfit(call, inputs, "input must have at least 1 dimension and weight 1 or 2 ([out, in])");
                }
                String batch = batch(nd[0] - 1, nd[0] - 1);
                labels.add(batch + "k");
                labels.add(nd[1] == 2 ? "nk" : "k");
                output = nd[1] == 2 ? batch + "n" : batch;
                if (inputs.size() == 3) {
                    added = 2;
                    labels.add(addedLabels(call, inputs, nd[2], output));
                }
            }
            case "matmul" -> {
                if (nd[0] < 1 || nd[1] < 1) {
                    throw misfit(call, inputs, "both arguments need at least 1 dimension");
                }
                int batch = Math.max(Math.max(nd[0] - 2, nd[1] - 2), 0);
                String a = nd[0] == 1 ? "k" : batch(batch, nd[0] - 2) + "mk";
                String b = nd[1] == 1 ? "k" : batch(batch, nd[1] - 2) + "kn";
                labels.add(a);
                labels.add(b);
                output = batch(batch, batch) + (nd[0] > 1 ? "m" : "") + (nd[1] > 1 ? "n" : "");
            }
            case "einsum" -> output = einsum(call, inputs, labels);
            default -> throw new IllegalArgumentException(call.qualifiedName() + " is not a matrix product");
        }
        MatmulEquation eq = new MatmulEquation(List.copyOf(labels), output, added, new HashMap<>());
        eq.measure(call, inputs);
        return eq;
    }

    /** Two factors of the given ranks and labels; returns the output's labels. */
    private static String factors(AtenCall call, List<TensorMeta> inputs, List<String> labels, int ra, String a, int rb, String b,
                                  String out) {
        if (inputs.size() != 2 || inputs.get(0).ndim() != ra || inputs.get(1).ndim() != rb) {
            throw misfit(call, inputs, "it takes a " + ra + "-D and a " + rb + "-D tensor (" + a + "," + b + "->" + out + ")");
        }
        labels.add(a);
        labels.add(b);
        return out;
    }

    /** First of the characters that stand for einsum's letters: none of them is upper-case (a broadcast batch label). */
    private static final char EINSUM_LETTERS = '\u4e00';

    /**
     * einsum's equation: each letter a label (mapped off the upper-case batch labels), {@code ...} the broadcast batch
     * labels, aligned to the right; without {@code ->} the output is {@code ...} then the letters used once, in
     * alphabetical order, as torch reads it. Returns the output's labels.
     */
    private static String einsum(AtenCall call, List<TensorMeta> inputs, List<String> labels) {
        String equation = String.valueOf(call.constant("equation")).replace(" ", "");
        int arrow = equation.indexOf("->");
        String[] terms = (arrow < 0 ? equation : equation.substring(0, arrow)).split(",", -1);
        if (terms.length != inputs.size()) {
            throw misfit(call, inputs, "the equation '" + equation + "' has " + terms.length + " operands");
        }
        int batch = 0;
        for (int i = 0; i < terms.length; i++) {
            int letters = terms[i].replace("...", "").length();
            boolean ellipsis = terms[i].contains("...");
            if (ellipsis ? letters > inputs.get(i).ndim() : letters != inputs.get(i).ndim()) {
                throw misfit(call, inputs, "operand " + i + " has " + inputs.get(i).ndim() + " dimensions where '" + terms[i] + "' names "
                    + letters);
            }
            batch = Math.max(batch, ellipsis ? inputs.get(i).ndim() - letters : 0);
        }
        for (int i = 0; i < terms.length; i++) {
            labels.add(einsumLabels(terms[i], batch, inputs.get(i).ndim() - terms[i].replace("...", "").length()));
        }
        if (arrow >= 0) {
            return einsumLabels(equation.substring(arrow + 2), batch, batch);
        }
        StringBuilder once = new StringBuilder();
        String all = String.join("", terms).replace("...", "");
        all.chars().distinct().sorted().filter(c -> all.indexOf(c) == all.lastIndexOf(c)).forEach(once::appendCodePoint);
        return batch(batch, batch) + einsumLabels(once.toString(), batch, 0);
    }

    private static String einsumLabels(String term, int batch, int ellipsisDims) {
        StringBuilder out = new StringBuilder();
        for (int j = 0; j < term.length(); j++) {
            if (term.startsWith("...", j)) {
                out.append(batch(batch, ellipsisDims));
                j += 2;
            } else {
                out.append((char) (EINSUM_LETTERS + term.charAt(j)));
            }
        }
        return out.toString();
    }

    /** The last {@code count} of {@code total} batch labels (aligned to the right, as broadcasting aligns). */
    private static String batch(int total, int count) {
        StringBuilder s = new StringBuilder();
        for (int j = total - count; j < total; j++) {
            s.append((char) ('A' + j));
        }
        return s.toString();
    }

    private static String addedLabels(AtenCall call, List<TensorMeta> inputs, int ndim, String output) {
        if (ndim > output.length()) {
            throw misfit(call, inputs, "the added tensor has more dimensions than the product");
        }
        return output.substring(output.length() - ndim);
    }

    /** Fills {@link #sizes} and checks that every label has one size (1 allowed where it may broadcast). */
    private void measure(AtenCall call, List<TensorMeta> metas) {
        for (int i = 0; i < metas.size(); i++) {
            for (int d = 0; d < metas.get(i).ndim(); d++) {
                sizes.merge(inputs.get(i).charAt(d), metas.get(i).size(d), Math::max);
            }
        }
        for (int i = 0; i < metas.size(); i++) {
            for (int d = 0; d < metas.get(i).ndim(); d++) {
                char c = inputs.get(i).charAt(d);
                long s = metas.get(i).size(d);
                boolean broadcastable = i == added || Character.isUpperCase(c);
                if (s != sizes.get(c) && !(broadcastable && s == 1)) {
                    throw misfit(call, metas, "dimension " + d + " of input " + i + " is " + s + " where " + sizes.get(c) + " is needed");
                }
            }
        }
    }

    /** The distinct labels: the output's first, then the contracted ones. */
    String labels() {
        StringBuilder s = new StringBuilder(output);
        for (String in : inputs) {
            for (char c : in.toCharArray()) {
                if (s.indexOf(String.valueOf(c)) < 0) {
                    s.append(c);
                }
            }
        }
        return s.toString();
    }

    /** True when some input holds {@code label} on two dimensions (einsum's {@code ii}): it cannot be sharded. */
    boolean repeated(char label) {
        return inputs.stream().anyMatch(in -> in.indexOf(label) != in.lastIndexOf(label));
    }

    long size(char label) {
        return sizes.get(label);
    }

    private static IllegalArgumentException misfit(AtenCall call, List<TensorMeta> inputs, String why) {
        return new IllegalArgumentException(call.qualifiedName() + ": inputs of shapes " + MatmulStrategy.shapes(inputs)
            + " do not fit: " + why);
    }
}
