package org.dtorch.core.safetensors;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict JSON reader (RFC 8259) for safetensors headers and index files, since no JSON library is on runtime-core's
 * class path. Objects become {@link LinkedHashMap}s in document order, arrays {@link List}s, strings {@link String}s,
 * integers {@link Long}s, other numbers {@link Double}s, {@code true}/{@code false} {@link Boolean}s and {@code null}
 * Java's null. It refuses what lenient readers accept: a duplicate member name, a leading zero, a trailing comma, an
 * unescaped control character, a lone surrogate escape, an integer beyond a long, anything after the value but
 * whitespace, and nesting deeper than {@value #MAX_DEPTH}.
 *
 * <p>Thread-safe: stateless; each parse uses its own cursor.
 */
public final class StrictJson {
    /** The deepest nesting accepted: a header is two levels deep; this bounds the recursion on hostile input. */
    public static final int MAX_DEPTH = 64;

    private final String text;
    private int pos;

    private StrictJson(String text) {
        this.text = text;
    }

    /**
     * The value {@code text} holds.
     *
     * @throws IllegalArgumentException naming what is wrong and the character offset where it is
     */
    public static Object parse(String text) {
        StrictJson reader = new StrictJson(text);
        reader.skipWhitespace();
        Object value = reader.value(0);
        reader.skipWhitespace();
        if (reader.pos != text.length()) {
            throw reader.error("unexpected " + reader.describeHere() + " after the value");
        }
        return value;
    }

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw error("nesting deeper than " + MAX_DEPTH + " levels");
        }
        if (pos >= text.length()) {
            throw error("the text ends where a value should start");
        }
        char c = text.charAt(pos);
        return switch (c) {
            case '{' -> object(depth);
            case '[' -> array(depth);
            case '"' -> string();
            case 't' -> literal("true", Boolean.TRUE);
            case 'f' -> literal("false", Boolean.FALSE);
            case 'n' -> literal("null", null);
            default -> {
                if (c == '-' || (c >= '0' && c <= '9')) {
                    yield number();
                }
                throw error("unexpected " + describeHere() + " where a value should start");
            }
        };
    }

    private Map<String, Object> object(int depth) {
        pos++;
        Map<String, Object> members = new LinkedHashMap<>();
        skipWhitespace();
        if (peek() == '}') {
            pos++;
            return members;
        }
        while (true) {
            skipWhitespace();
            if (peek() != '"') {
                throw error("expected a member name in quotes, found " + describeHere());
            }
            int at = pos;
            String name = string();
            skipWhitespace();
            expect(':');
            skipWhitespace();
            Object v = value(depth + 1);
            if (members.containsKey(name)) {
                throw new IllegalArgumentException("duplicate member name \"" + name + "\" at character " + at);
            }
            members.put(name, v);
            skipWhitespace();
            char c = peek();
            pos++;
            if (c == '}') {
                return members;
            }
            if (c != ',') {
                pos--;
                throw error("expected ',' or '}' in an object, found " + describeHere());
            }
        }
    }

    private List<Object> array(int depth) {
        pos++;
        List<Object> items = new ArrayList<>();
        skipWhitespace();
        if (peek() == ']') {
            pos++;
            return items;
        }
        while (true) {
            skipWhitespace();
            items.add(value(depth + 1));
            skipWhitespace();
            char c = peek();
            pos++;
            if (c == ']') {
                return items;
            }
            if (c != ',') {
                pos--;
                throw error("expected ',' or ']' in an array, found " + describeHere());
            }
        }
    }

    private String string() {
        pos++;
        StringBuilder out = new StringBuilder();
        while (true) {
            if (pos >= text.length()) {
                throw error("the text ends inside a string");
            }
            char c = text.charAt(pos++);
            if (c == '"') {
                return out.toString();
            }
            if (c < 0x20) {
                pos--;
                throw error("an unescaped control character U+" + String.format("%04X", (int) c) + " in a string");
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (pos >= text.length()) {
                throw error("the text ends inside an escape");
            }
            char e = text.charAt(pos++);
            switch (e) {
                case '"', '\\', '/' -> out.append(e);
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'n' -> out.append('\n');
                case 'r' -> out.append('\r');
                case 't' -> out.append('\t');
                case 'u' -> out.append(unicodeEscape());
                default -> {
                    pos--;
                    throw error("an unknown escape \\" + e);
                }
            }
        }
    }

    /** The character(s) of a {@code \\uXXXX} escape, a surrogate pair taken whole. */
    private String unicodeEscape() {
        char first = hex4();
        if (Character.isHighSurrogate(first)) {
            if (text.startsWith("\\u", pos)) {
                pos += 2;
                char second = hex4();
                if (Character.isLowSurrogate(second)) {
                    return new String(new char[] {first, second});
                }
            }
            throw error("a lone high surrogate escape");
        }
        if (Character.isLowSurrogate(first)) {
            throw error("a lone low surrogate escape");
        }
        return String.valueOf(first);
    }

    private char hex4() {
        if (pos + 4 > text.length()) {
            throw error("the text ends inside a \\u escape");
        }
        int v = 0;
        for (int i = 0; i < 4; i++) {
            int digit = Character.digit(text.charAt(pos + i), 16);
            if (digit < 0) {
                pos += i;
                throw error("a \\u escape needs 4 hex digits, found " + describeHere());
            }
            v = v * 16 + digit;
        }
        pos += 4;
        return (char) v;
    }

    private Object number() {
        int start = pos;
        if (peek() == '-') {
            pos++;
        }
        if (peek() == '0') {
            pos++;
            if (Character.isDigit(peek())) {
                throw error("a number with a leading zero");
            }
        } else if (Character.isDigit(peek())) {
            digits();
        } else {
            throw error("a '-' without digits");
        }
        boolean integral = true;
        if (peek() == '.') {
            pos++;
            integral = false;
            if (!Character.isDigit(peek())) {
                throw error("a '.' without digits after it");
            }
            digits();
        }
        if (peek() == 'e' || peek() == 'E') {
            pos++;
            integral = false;
            if (peek() == '+' || peek() == '-') {
                pos++;
            }
            if (!Character.isDigit(peek())) {
                throw error("an exponent without digits");
            }
            digits();
        }
        String literal = text.substring(start, pos);
        if (!integral) {
            return Double.parseDouble(literal);
        }
        try {
            return Long.parseLong(literal);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("the integer " + literal + " at character " + start + " does not fit in a long");
        }
    }

    private void digits() {
        while (Character.isDigit(peek())) {
            pos++;
        }
    }

    private Object literal(String word, Object value) {
        if (!text.startsWith(word, pos)) {
            throw error("unexpected " + describeHere() + " where a value should start");
        }
        pos += word.length();
        return value;
    }

    private void expect(char c) {
        if (peek() != c) {
            throw error("expected '" + c + "', found " + describeHere());
        }
        pos++;
    }

    /** The character at the cursor, or 0 at the end (never a character JSON's syntax uses outside strings). */
    private char peek() {
        return pos < text.length() ? text.charAt(pos) : 0;
    }

    private void skipWhitespace() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            pos++;
        }
    }

    private String describeHere() {
        if (pos >= text.length()) {
            return "the end of the text";
        }
        char c = text.charAt(pos);
        return c < 0x20 || c > 0x7e ? "U+" + String.format("%04X", (int) c) : "'" + c + "'";
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException(what + " at character " + pos);
    }
}
