package org.dtorch.core.communication;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The communication options' system properties: a bad value is refused with a message naming it, never a silent default. */
class CommOptionsTest {

    @Test
    void shouldRefuseTimeoutsThatAreNotPositiveWholeSeconds() {
        CommOptions.global(); // the options in force stay as they are while the properties change below
        for (String bad : new String[] {"0", "-5", "x", "", "1.5", "99999999999999999999"}) {
            IllegalArgumentException e = withProperty(CommOptions.TIMEOUT_PROPERTY, bad,
                () -> assertThrows(IllegalArgumentException.class, CommOptions::fromSystemProperties));
            assertTrue(e.getMessage().contains("dtorch.comm.timeoutSeconds") && e.getMessage().contains("'" + bad + "'"), e.getMessage());
        }
        IllegalArgumentException spin = withProperty(CommOptions.SPIN_PROPERTY, "-1",
            () -> assertThrows(IllegalArgumentException.class, CommOptions::fromSystemProperties));
        assertTrue(spin.getMessage().contains("dtorch.comm.spinMicros"), spin.getMessage());
    }

    @Test
    void shouldReadValidProperties() {
        CommOptions read = withProperty(CommOptions.TIMEOUT_PROPERTY, " 7 ", CommOptions::fromSystemProperties);
        assertEquals(Duration.ofSeconds(7), read.timeout());
    }

    private static <T> T withProperty(String name, String value, java.util.function.Supplier<T> body) {
        String saved = System.getProperty(name);
        System.setProperty(name, value);
        try {
            return body.get();
        } finally {
            if (saved == null) {
                System.clearProperty(name);
            } else {
                System.setProperty(name, saved);
            }
        }
    }
}
