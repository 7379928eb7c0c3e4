package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.v;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.dtorch.api.DTensor;

/**
 * The derivative of {@code einsum}: the gradient of operand {@code i} is the {@code einsum} of the output's gradient
 * with every other operand, to operand {@code i}'s labels, since the product is linear in each operand. A label only
 * operand {@code i} holds (the forward sums it away alone) does not appear in that product: the gradient is computed
 * without it and expanded back along it. {@code ...} becomes labels of its own for each operand's dimensions, aligned
 * at the end, and a dimension of size one that the others broadcast has its gradient summed. Equations with a label
 * twice in one operand (a diagonal) have no derivative here.
 *
 * <p>Thread-safe: stateless.
 */
final class Einsum {
    private Einsum() {
    }

    /** The derivative of {@code einsum(equation, operands)}, or null for the equations described above. */
    static Derivative of(String equation, DTensor[] operands) {
        if (equation == null) {
            return null;
        }
        String spaced = equation.replace(" ", "");
        int arrow = spaced.indexOf("->");
        List<String> given = List.of((arrow < 0 ? spaced : spaced.substring(0, arrow)).split(",", -1));
        if (given.size() != operands.length) {
            return null;
        }
        String ellipsis = ellipsisLabels(spaced, given, operands);
        if (ellipsis == null) {
            return null;
        }
        List<String> lhs = new ArrayList<>();
        for (int i = 0; i < given.size(); i++) {
            String term = given.get(i);
            int explicit = term.replace("...", "").length();
            lhs.add(term.replace("...", ellipsis.substring(ellipsis.length() - (operands[i].ndim() - explicit))));
        }
        for (String term : lhs) {
            if (term.chars().distinct().count() != term.length()) {
                return null;
            }
        }
        String output = arrow < 0 ? ellipsis + implicitOutput(lhs, ellipsis) : spaced.substring(arrow + 2).replace("...", ellipsis);
        return (in, out, g, n) -> {
            DTensor[] result = new DTensor[in.length];
            for (int i = 0; i < in.length; i++) {
                if (n[i]) {
                    result[i] = operandGrad(i, lhs, output, in, g[0]);
                }
            }
            return result;
        };
    }

    /**
     * Labels of their own for the dimensions {@code ...} stands for, as many as the operand with the most of them has
     * (the others' are the last of them: broadcast dimensions align at the end), taken from the letters the equation
     * does not use; empty without {@code ...}; null where the operands do not fit the equation.
     */
    private static String ellipsisLabels(String equation, List<String> terms, DTensor[] operands) {
        int most = 0;
        for (int i = 0; i < terms.size(); i++) {
            String term = terms.get(i);
            boolean has = term.contains("...");
            int explicit = term.replace("...", "").length();
            if (has && (term.indexOf("...") != term.lastIndexOf("...") || operands[i].ndim() < explicit)
                || !has && operands[i].ndim() != explicit || term.replace("...", "").contains(".")) {
                return null;
            }
            most = Math.max(most, has ? operands[i].ndim() - explicit : 0);
        }
        StringBuilder labels = new StringBuilder();
        String letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        for (int k = 0; k < letters.length() && labels.length() < most; k++) {
            if (equation.indexOf(letters.charAt(k)) < 0) {
                labels.append(letters.charAt(k));
            }
        }
        return labels.length() == most ? labels.toString() : null;
    }

    /**
     * The labels an equation without {@code ->} keeps after the ellipsis's: those that appear once, in alphabetical order
     * (as torch orders them).
     */
    private static String implicitOutput(List<String> lhs, String ellipsis) {
        TreeMap<Character, Integer> counts = new TreeMap<>();
        for (String term : lhs) {
            for (char c : term.toCharArray()) {
                counts.merge(c, 1, Integer::sum);
            }
        }
        StringBuilder out = new StringBuilder();
        counts.forEach((c, k) -> {
            if (k == 1 && ellipsis.indexOf(c) < 0) {
                out.append(c);
            }
        });
        return out.toString();
    }

    /** Each label's size: the largest any operand or the output gives it (the others broadcast a size of one). */
    private static Map<Character, Long> labelSizes(List<String> lhs, String output, DTensor[] in, DTensor g) {
        Map<Character, Long> sizes = new HashMap<>();
        for (int j = 0; j <= lhs.size(); j++) {
            String term = j < lhs.size() ? lhs.get(j) : output;
            DTensor t = j < lhs.size() ? in[j] : g;
            for (int d = 0; d < term.length(); d++) {
                sizes.merge(term.charAt(d), t.size(d), Math::max);
            }
        }
        return sizes;
    }

    /** {@code t} expanded where it broadcasts a dimension of size one: the gradient's product takes equal sizes. */
    private static DTensor broadcast(DTensor t, String term, Map<Character, Long> sizes) {
        long[] shape = new long[term.length()];
        for (int d = 0; d < shape.length; d++) {
            shape[d] = sizes.get(term.charAt(d));
        }
        return Grads.expand(t, shape);
    }

    private static DTensor operandGrad(int i, List<String> lhs, String output, DTensor[] in, DTensor g) {
        StringBuilder elsewhere = new StringBuilder(output);
        List<DTensor> operands = new ArrayList<>();
        List<String> terms = new ArrayList<>();
        operands.add(g);
        terms.add(output);
        Map<Character, Long> sizes = labelSizes(lhs, output, in, g);
        for (int j = 0; j < lhs.size(); j++) {
            if (j != i) {
                operands.add(broadcast(in[j], lhs.get(j), sizes));
                terms.add(lhs.get(j));
                elsewhere.append(lhs.get(j));
            }
        }
        String own = lhs.get(i);
        StringBuilder reached = new StringBuilder();
        for (char c : own.toCharArray()) {
            if (elsewhere.indexOf(String.valueOf(c)) >= 0) {
                reached.append(c);
            }
        }
        String equation = String.join(",", terms) + "->" + reached;
        DTensor grad = aten("einsum", "s,[T]", v(equation, Collections.nCopies(operands.size(), null)), operands.toArray(DTensor[]::new));
        long[] reachedShape = new long[reached.length()];
        for (int r = 0; r < reachedShape.length; r++) {
            reachedShape[r] = in[i].size(own.indexOf(reached.charAt(r)));
        }
        grad = Grads.sumTo(grad, reachedShape);
        if (reached.length() == own.length()) {
            return grad;
        }
        for (int d = 0; d < own.length(); d++) {
            if (reached.indexOf(String.valueOf(own.charAt(d))) < 0) {
                grad = aten("unsqueeze", "T,i", v(null, (long) d), grad);
            }
        }
        return Grads.expand(grad, in[i].shape());
    }
}
