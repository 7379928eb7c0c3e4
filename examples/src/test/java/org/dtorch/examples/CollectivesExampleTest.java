package org.dtorch.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class CollectivesExampleTest {

    @Test
    @Timeout(120)
    void shouldPrintTheSameSumAndGatherOnEveryRank() throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            CollectivesExample.main(new String[0]);
        } finally {
            System.setOut(original);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(4, out.split("\\[\\[10.0, 10.0, 10.0\\], \\[10.0, 10.0, 10.0\\]\\]", -1).length - 1, out);
        assertEquals(4, out.split("\\[0, 1, 2, 3, 4, 5, 6, 7, 8, 9\\]", -1).length - 1, out);
        assertTrue(out.contains("my shard, rows 6..7:") && out.contains("[[6], [7]]"), out);
    }
}
