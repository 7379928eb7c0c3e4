package org.dtorch.core.runtime.process;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import org.dtorch.core.shm.UnsafePathException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Where the token comes from, and what is refused: no token across nodes, a short token, a file others can read. */
class ClusterTokenTest {
    private static final String SECRET = "0123456789abcdef0123";

    @Test
    void shouldRequireATokenForMoreThanOneNodeNamingBothWaysToGiveIt() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ClusterToken.resolve(2, null, Map.of()));
        assertEquals("a run of 2 nodes needs a shared token to authenticate its control connections: set the environment "
            + "variable DTORCH_TOKEN or pass --token-file FILE (a file of mode 0600), with the same token of at least 16 bytes "
            + "on every node", e.getMessage());
        assertTrue(ClusterToken.resolve(1, null, Map.of()).isEmpty());
    }

    @Test
    void shouldTakeTheEnvironmentAndNeverShowTheToken() {
        ClusterToken token = ClusterToken.resolve(2, null, Map.of(ClusterToken.ENV, SECRET)).orElseThrow();
        assertEquals("token from the environment variable DTORCH_TOKEN", token.toString());
        assertFalse(token.toString().contains(SECRET));
    }

    @Test
    void shouldRefuseAShortToken() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> ClusterToken.resolve(2, null, Map.of(ClusterToken.ENV, "  short\n")));
        assertEquals("the token from the environment variable DTORCH_TOKEN has 5 bytes, at least 16 are needed (for example: "
            + "openssl rand -hex 32)", e.getMessage());
    }

    @Test
    void shouldPreferTheTokenFileAndRefuseOneThatGroupOrOthersCanRead(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("token");
        Files.writeString(file, SECRET + "\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        ClusterToken token = ClusterToken.resolve(2, file, Map.of(ClusterToken.ENV, "ignored when a file is given")).orElseThrow();
        assertEquals("token from the token file " + file, token.toString());

        for (String mode : new String[] {"rw-r-----", "rw----r--"}) {
            Files.setPosixFilePermissions(file, PosixFilePermissions.fromString(mode));
            UnsafePathException e = assertThrows(UnsafePathException.class, () -> ClusterToken.resolve(2, file, Map.of()));
            String octal = mode.equals("rw-r-----") ? "0640" : "0604";
            assertEquals("the token file " + file + " has mode " + octal + ": group or others have access to it (it must be 0600 "
                + "or 0400); refusing to use it. Make it private with chmod 600 " + file + ".", e.getMessage());
        }
    }

    @Test
    void shouldRefuseATokenFileThatIsADirectory(@TempDir Path dir) {
        UnsafePathException e = assertThrows(UnsafePathException.class, () -> ClusterToken.fromFile(dir));
        assertEquals("the token file " + dir + " is not a regular file; refusing to use it. Make it private with chmod 600 " + dir
            + ".", e.getMessage());
    }
}
