package org.dtorch.core.testing;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Checks the structure of the DOT text the graph dump writes, without Graphviz: {@code // } comment lines, then
 * {@code digraph ID { ... }} whose statements are {@code node [...];}, {@code edge [...];}, {@code ID [...];} and
 * {@code ID -> ID [...];}, attribute values IDs or quoted strings whose only escapes are {@code \"}, {@code \\} and
 * {@code \n}. Braces and brackets must balance, and every edge's endpoints must be declared before it. Throws
 * {@link AssertionError} naming the first problem and where it is.
 *
 * <p>Thread-safe: stateless.
 */
public final class DotSyntax {
    private DotSyntax() {
    }

    /** Checks {@code dot}; returns the declared node ids in order. */
    public static List<String> check(String dot) {
        List<String> tokens = tokens(dot);
        int[] at = {0};
        expect(tokens, at, "digraph");
        identifier(tokens, at);
        expect(tokens, at, "{");
        List<String> declared = new ArrayList<>();
        Set<String> known = new HashSet<>();
        while (!peek(tokens, at).equals("}")) {
            String first = identifier(tokens, at);
            if (peek(tokens, at).equals("->")) {
                at[0]++;
                String second = identifier(tokens, at);
                for (String end : List.of(first, second)) {
                    if (!known.contains(end)) {
                        throw new AssertionError("edge " + first + " -> " + second + " uses " + end + ", not declared before it");
                    }
                }
            } else if (!first.equals("node") && !first.equals("edge")) {
                if (!known.add(first)) {
                    throw new AssertionError("node " + first + " declared twice");
                }
                declared.add(first);
            }
            if (peek(tokens, at).equals("[")) {
                attributes(tokens, at);
            }
            expect(tokens, at, ";");
        }
        expect(tokens, at, "}");
        if (at[0] != tokens.size()) {
            throw new AssertionError("text after the graph's closing brace: " + tokens.get(at[0]));
        }
        return declared;
    }

    private static void attributes(List<String> tokens, int[] at) {
        expect(tokens, at, "[");
        while (true) {
            identifier(tokens, at);
            expect(tokens, at, "=");
            String value = next(tokens, at);
            if (!value.startsWith("\"") && !isIdentifier(value)) {
                throw new AssertionError("attribute value " + value + " is neither an id nor a quoted string");
            }
            String separator = next(tokens, at);
            if (separator.equals("]")) {
                return;
            }
            if (!separator.equals(",")) {
                throw new AssertionError("expected , or ] in an attribute list, got " + separator);
            }
        }
    }

    /** Comments dropped; quoted strings kept whole, quotes included; punctuation and ids one token each. */
    private static List<String> tokens(String dot) {
        List<String> tokens = new ArrayList<>();
        int i = 0;
        while (i < dot.length()) {
            char c = dot.charAt(i);
            if (Character.isWhitespace(c)) {
                i++;
            } else if (dot.startsWith("//", i)) {
                i = dot.indexOf('\n', i) < 0 ? dot.length() : dot.indexOf('\n', i) + 1;
            } else if (c == '"') {
                int end = quotedEnd(dot, i);
                tokens.add(dot.substring(i, end));
                i = end;
            } else if (dot.startsWith("->", i)) {
                tokens.add("->");
                i += 2;
            } else if ("{}[]=;,".indexOf(c) >= 0) {
                tokens.add(String.valueOf(c));
                i++;
            } else {
                int start = i;
                while (i < dot.length() && (Character.isLetterOrDigit(dot.charAt(i)) || dot.charAt(i) == '_')) {
                    i++;
                }
                if (i == start) {
                    throw new AssertionError("unexpected character '" + c + "' at offset " + i);
                }
                tokens.add(dot.substring(start, i));
            }
        }
        return tokens;
    }

    /** The offset after the string that starts at {@code start}; escapes and control characters checked. */
    private static int quotedEnd(String dot, int start) {
        for (int i = start + 1; i < dot.length(); i++) {
            char c = dot.charAt(i);
            if (c == '"') {
                return i + 1;
            }
            if (c < 0x20) {
                throw new AssertionError("control character " + (int) c + " in the string at offset " + start);
            }
            if (c == '\\') {
                char escaped = i + 1 < dot.length() ? dot.charAt(i + 1) : ' ';
                if ("\"\\n".indexOf(escaped) < 0) {
                    throw new AssertionError("escape \\" + escaped + " in the string at offset " + start);
                }
                i++;
            }
        }
        throw new AssertionError("the string at offset " + start + " never ends");
    }

    private static String identifier(List<String> tokens, int[] at) {
        String token = next(tokens, at);
        if (!isIdentifier(token)) {
            throw new AssertionError("expected an id, got " + token);
        }
        return token;
    }

    private static boolean isIdentifier(String token) {
        return !token.isEmpty() && !Character.isDigit(token.charAt(0))
            && token.chars().allMatch(ch -> Character.isLetterOrDigit(ch) || ch == '_');
    }

    private static void expect(List<String> tokens, int[] at, String wanted) {
        String token = next(tokens, at);
        if (!token.equals(wanted)) {
            throw new AssertionError("expected " + wanted + " at token " + (at[0] - 1) + ", got " + token);
        }
    }

    private static String peek(List<String> tokens, int[] at) {
        if (at[0] >= tokens.size()) {
            throw new AssertionError("the text ends before the graph's closing brace (unbalanced braces)");
        }
        return tokens.get(at[0]);
    }

    private static String next(List<String> tokens, int[] at) {
        String token = peek(tokens, at);
        at[0]++;
        return token;
    }
}
