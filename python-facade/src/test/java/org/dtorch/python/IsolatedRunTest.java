package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code dtorch run --isolated}: the script sees its own directory (read-only) and nothing else of the host, and the
 * package still works there ({@code tolist()}, {@code await}). The scripts are {@code src/test/python/isolated/*.py}.
 */
@Timeout(180)
class IsolatedRunTest {
    private static final Path SCRIPTS = Path.of("src/test/python/isolated");

    /** The scripts copied into {@code dir}, with a link to {@code /etc/passwd} next to them. */
    private static Path stage(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(SCRIPTS)) {
            for (Path file : files.toList()) {
                Files.copy(file, dir.resolve(file.getFileName()), StandardCopyOption.REPLACE_EXISTING);
            }
        }
        Files.createSymbolicLink(dir.resolve("passwd"), Path.of("/etc/passwd"));
        return dir;
    }

    private static int launch(StringBuilder output, String... args) {
        PrintStream originalErr = System.err;
        PrintStream originalOut = System.out;
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        PrintStream capture = new PrintStream(buffer, true, StandardCharsets.UTF_8);
        System.setErr(capture);
        System.setOut(capture);
        try {
            return Launcher.run(args);
        } finally {
            System.setErr(originalErr);
            System.setOut(originalOut);
            output.append(buffer.toString(StandardCharsets.UTF_8));
        }
    }

    @Test
    void shouldRunWithValuesAndAwaitButNoHostAccessBeyondTheScriptsDirectory(@TempDir Path dir) throws IOException {
        Path scripts = stage(dir);
        StringBuilder output = new StringBuilder();
        int status = launch(output, "run", "--isolated", "--devices", "cpu:2", scripts.resolve("check_isolation.py").toString());
        assertEquals(0, status, output.toString());
        assertTrue(output.toString().contains("isolated: all checks passed"), output.toString());
        assertFalse(Files.exists(scripts.resolve("new.txt")), "the isolated script wrote next to itself");
    }

    @Test
    void shouldStopAnIsolatedScriptThatOpensASocket(@TempDir Path dir) throws IOException {
        Path scripts = stage(dir);
        StringBuilder output = new StringBuilder();
        int status = launch(output, "run", "--isolated", "--devices", "cpu:2", scripts.resolve("open_socket.py").toString());
        assertEquals(1, status, output.toString());
        assertFalse(output.toString().contains("a socket was opened"), output.toString());
        // GraalPy refuses the socket with an error Python cannot catch: the script stops, and the launcher says why.
        assertTrue(output.toString().contains("in create_connection") && output.toString().contains("--isolated"), output.toString());
    }
}
