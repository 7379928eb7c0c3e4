package org.dtorch.core.communication.group;

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
        assertTrue(output.contains("[Gloo] Rank 0 is connected to 1 peer ranks") && output.contains("[Gloo] Rank 1 is connected to 1 peer ranks"),
            output);
        assertTrue(output.contains("[ CPULongType{4} ]"), output);
    }
}
