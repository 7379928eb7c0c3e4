package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.DeviceKind;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A Gloo group's settings are read before its ranks meet: a bad system property fails the rank at once, naming the
 * property, instead of after connecting (or, with a missing peer, after the group's whole timeout).
 */
@Timeout(60)
class C10dBackendTest {

    @Test
    void shouldRefuseABadSettingBeforeWaitingForTheOtherRanks() {
        for (String[] bad : new String[][] {
            {GlooRing.RING_PROPERTY, "yes", "dtorch.gloo.ring must be 'true' or 'false', got 'yes'"},
            {GlooCopyOptions.COPY_THREADS_PROPERTY, "many", "dtorch.gloo.copyThreads must be a whole number, got 'many'"},
            {ResultBufferCache.MAX_BYTES_PROPERTY, "lots", ResultBufferCache.MAX_BYTES_PROPERTY + " must be a whole number of bytes, got 'lots'"}}) {
            String before = System.setProperty(bad[0], bad[1]);
            try {
                // Rank 1 never comes; the group's timeout is far longer than the test's.
                String message = assertThrows(IllegalArgumentException.class, () -> new ThreadGroup(
                    GlobalCommInstanceId.next() + "/bad-setting", DeviceKind.CPU, List.of(0L, 1L), 0, 2, false, Duration.ofMinutes(10)))
                    .getMessage();
                assertTrue(message.contains(bad[2]), message);
            } finally {
                if (before == null) {
                    System.clearProperty(bad[0]);
                } else {
                    System.setProperty(bad[0], before);
                }
            }
        }
    }
}
