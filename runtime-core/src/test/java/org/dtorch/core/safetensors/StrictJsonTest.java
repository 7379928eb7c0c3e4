package org.dtorch.core.safetensors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The strict JSON reader: what it gives for valid documents (checked against Jackson) and what it refuses, with where. */
class StrictJsonTest {

    @Test
    void shouldReadWhatJacksonReads() throws Exception {
        String doc = " {\"a\": [1, -2, 3.5, 1e3, true, false, null], \"b\": {\"c\": \"x\\\"y\\\\z\\n\\u00e9\\ud83d\\ude00/\"},"
            + " \"__metadata__\": {\"format\": \"pt\"}, \"big\": 9223372036854775807}  ";
        Object ours = StrictJson.parse(doc);
        Object jackson = new ObjectMapper().readValue(doc, Object.class);
        assertEquals(normalise(jackson), normalise(ours));
        @SuppressWarnings("unchecked")
        Map<String, Object> root = (Map<String, Object>) ours;
        assertEquals(List.of("a", "b", "__metadata__", "big"), List.copyOf(root.keySet()), "document order is kept");
        assertEquals(Long.MAX_VALUE, root.get("big"));
        assertNull(((List<?>) root.get("a")).get(6));
    }

    /** Jackson gives Integers for small numbers; compare numbers as longs or doubles. */
    private static Object normalise(Object v) {
        if (v instanceof Map<?, ?> m) {
            Map<Object, Object> out = new LinkedHashMap<>();
            m.forEach((k, x) -> out.put(k, normalise(x)));
            return out;
        }
        if (v instanceof List<?> l) {
            return l.stream().map(StrictJsonTest::normalise).toList();
        }
        if (v instanceof Integer i) {
            return i.longValue();
        }
        return v;
    }

    @Test
    void shouldRefuseMalformedDocumentsNamingWhere() {
        refuses("{\"a\": 1,}", "expected a member name");
        refuses("[1, 2,]", "where a value should start");
        refuses("{\"a\": 1, \"a\": 2}", "duplicate member name \"a\"");
        refuses("{\"a\": 01}", "leading zero");
        refuses("{\"a\": 1} x", "after the value");
        refuses("{\"a\": \"\u0001\"}", "control character");
        refuses("{\"a\": \"\\ud800\"}", "lone high surrogate");
        refuses("{\"a\": \"\\x\"}", "unknown escape");
        refuses("{\"a\": 99999999999999999999}", "does not fit in a long");
        refuses("{\"a\": tru}", "where a value should start");
        refuses("{\"a\" 1}", "expected ':'");
        refuses("{\"a\": [1 2]}", "expected ',' or ']'");
        refuses("{\"a\": \"open", "ends inside a string");
        refuses("", "ends where a value should start");
        refuses("[".repeat(StrictJson.MAX_DEPTH + 2), "nesting deeper");
    }

    private static void refuses(String doc, String fragment) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StrictJson.parse(doc), doc);
        assertTrue(e.getMessage().contains(fragment), "for " + doc + ": " + e.getMessage());
        assertTrue(e.getMessage().contains("at character"), e.getMessage());
    }
}
