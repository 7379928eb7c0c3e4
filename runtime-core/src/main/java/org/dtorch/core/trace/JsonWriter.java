package org.dtorch.core.trace;

import java.io.IOException;
import java.io.Writer;

/**
 * A small streaming JSON writer for the trace export (no JSON library is on runtime-core's class path): objects,
 * arrays, strings escaped per RFC 8259 (quote, backslash, control characters, and lone surrogates as {@code \\uXXXX}),
 * integers, and microsecond timestamps written exactly from nanoseconds. The caller writes a well-formed document;
 * the writer only places the commas.
 *
 * <p>Not thread-safe: one thread writes a document.
 */
final class JsonWriter {
    private final Writer out;
    /** Whether the current object or array needs a comma before its next member. */
    private boolean needComma;

    JsonWriter(Writer out) {
        this.out = out;
    }

    JsonWriter beginObject() throws IOException {
        return open('{');
    }

    JsonWriter endObject() throws IOException {
        return close('}');
    }

    JsonWriter beginArray() throws IOException {
        return open('[');
    }

    JsonWriter endArray() throws IOException {
        return close(']');
    }

    private JsonWriter open(char bracket) throws IOException {
        comma();
        out.write(bracket);
        needComma = false;
        return this;
    }

    private JsonWriter close(char bracket) throws IOException {
        out.write(bracket);
        needComma = true;
        return this;
    }

    /** A member name; its value follows. */
    JsonWriter name(String name) throws IOException {
        comma();
        string(name);
        out.write(':');
        needComma = false;
        return this;
    }

    JsonWriter value(String value) throws IOException {
        comma();
        string(value);
        needComma = true;
        return this;
    }

    JsonWriter value(long value) throws IOException {
        comma();
        out.write(Long.toString(value));
        needComma = true;
        return this;
    }

    /** {@code nanos} as microseconds with three decimals, exactly (no floating-point rounding). */
    JsonWriter micros(long nanos) throws IOException {
        comma();
        if (nanos < 0) {
            out.write('-');
            nanos = -nanos;
        }
        long fraction = nanos % 1000;
        out.write(Long.toString(nanos / 1000));
        out.write('.');
        out.write((char) ('0' + fraction / 100));
        out.write((char) ('0' + fraction / 10 % 10));
        out.write((char) ('0' + fraction % 10));
        needComma = true;
        return this;
    }

    private void comma() throws IOException {
        if (needComma) {
            out.write(',');
        }
    }

    private void string(String s) throws IOException {
        out.write('"');
        for (int i = 0, n = s.length(); i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.write("\\\"");
                case '\\' -> out.write("\\\\");
                case '\n' -> out.write("\\n");
                case '\r' -> out.write("\\r");
                case '\t' -> out.write("\\t");
                default -> {
                    if (c < 0x20 || Character.isSurrogate(c) && !pairedAt(s, i)) {
                        out.write(String.format("\\u%04x", (int) c));
                    } else if (Character.isHighSurrogate(c)) {
                        out.write(c);
                        out.write(s.charAt(++i));
                    } else {
                        out.write(c);
                    }
                }
            }
        }
        out.write('"');
    }

    /** Whether {@code s.charAt(i)} is a high surrogate followed by a low one. */
    private static boolean pairedAt(String s, int i) {
        return Character.isHighSurrogate(s.charAt(i)) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
    }
}
