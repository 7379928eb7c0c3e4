package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.v;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.TreeMap;
import org.dtorch.api.DTensor;

/**
 * The derivative of {@code einsum}: the gradient of operand {@code i} is the {@code einsum} of the output's gradient
 * with every other operand, to operand {@code i}'s labels, since the product is linear in each operand. A label only
 * operand {@code i} holds (the forward sums it away alone) does not appear in that product: the gradient is computed
 * without it and expanded back along it. Equations with {@code ...} (broadcast batch dimensions) or with a label twice
 * in one operand (a diagonal) have no derivative here.
 *
 * <p>Thread-safe: stateless.
 */
final class Einsum {
    private Einsum() {
    }

    /** The derivative of {@code einsum(equation, operands)}, or null for the equations described above. */
    static Derivative of(String equation, int operands) {
        if (equation == null || equation.contains(".")) {
            return null;
        }
        String spaced = equation.replace(" ", "");
        int arrow = spaced.indexOf("->");
        List<String> lhs = List.of((arrow < 0 ? spaced : spaced.substring(0, arrow)).split(",", -1));
        if (lhs.size() != operands) {
            return null;
        }
        for (String term : lhs) {
            if (term.chars().distinct().count() != term.length()) {
                return null;
            }
        }
        String output = arrow < 0 ? implicitOutput(lhs) : spaced.substring(arrow + 2);
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

    /** The labels an equation without {@code ->} keeps: those that appear once, in alphabetical order (as torch orders them). */
    private static String implicitOutput(List<String> lhs) {
        TreeMap<Character, Integer> counts = new TreeMap<>();
        for (String term : lhs) {
            for (char c : term.toCharArray()) {
                counts.merge(c, 1, Integer::sum);
            }
        }
        StringBuilder out = new StringBuilder();
        counts.forEach((c, k) -> {
            if (k == 1) {
                out.append(c);
            }
        });
        return out.toString();
    }

    private static DTensor operandGrad(int i, List<String> lhs, String output, DTensor[] in, DTensor g) {
        StringBuilder elsewhere = new StringBuilder(output);
        List<DTensor> operands = new ArrayList<>();
        List<String> terms = new ArrayList<>();
        operands.add(g);
        terms.add(output);
        for (int j = 0; j < lhs.size(); j++) {
            if (j != i) {
                operands.add(in[j]);
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
