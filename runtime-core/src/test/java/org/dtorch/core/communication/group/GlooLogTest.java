package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import org.dtorch.core.testing.ChildJvm;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Gloo's connection lines go to the process's C++ {@code std::cout}, so each case runs a group in a child JVM and
 * reads what that JVM printed.
 */
@Tag("multiprocess")
@Timeout(180)
class GlooLogTest {

    private static String runChild(Map<String, String> properties) {
        try (ChildJvm child = ChildJvm.start("gloo-connect", GlooConnectChild.class, properties)) {
            child.awaitSuccess(Duration.ofSeconds(120));
            return child.output();
        }
    }

    private static int occurrences(String text, String piece) {
        int count = 0;
        for (int at = text.indexOf(piece); at >= 0; at = text.indexOf(piece, at + piece.length())) {
            count++;
        }
        return count;
    }

    @Test
    void shouldMuteGlooConnectionLinesButNotLaterCxxOutput() {
        String output = runChild(Map.of());
        assertTrue(output.contains("DONE"), output);
        assertFalse(output.contains("[Gloo]"), output);
        // std::cout works again once the group is connected: at::print's tensor is there.
        assertTrue(output.contains("[ CPULongType{4} ]"), output);
    }

    @Test
    void shouldPrintGlooConnectionLinesWhenVerbose() {
        String output = runChild(Map.of(GlooLog.VERBOSE_PROPERTY, "true"));
        // Both ranks are threads of the child and print at once; Gloo writes each line to std::cout in pieces
        // ("[Gloo] Rank ", the rank, " is connected to ", ...), so two lines may interleave piece by piece
        // ("[Gloo] Rank [Gloo] Rank 1 is connected ..."): count the pieces, one of each per rank.
        assertEquals(2, occurrences(output, "[Gloo] Rank "), output);
        assertEquals(2, occurrences(output, " is connected to "), output);
        assertEquals(2, occurrences(output, "Expected number of connected peer ranks is : "), output);
        assertTrue(output.contains("[ CPULongType{4} ]"), output);
    }
}
