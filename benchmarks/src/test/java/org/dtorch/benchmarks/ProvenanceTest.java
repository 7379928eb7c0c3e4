package org.dtorch.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(60)
class ProvenanceTest {

    private static String run(Path dir, String... command) throws IOException, InterruptedException {
        List<String> full = new ArrayList<>(List.of("git", "-C", dir.toString(), "-c", "user.name=bench", "-c", "user.email=bench@localhost"));
        full.addAll(List.of(command));
        Process p = new ProcessBuilder(full).redirectErrorStream(true).start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "git " + String.join(" ", command) + " did not finish");
        String out = new String(p.getInputStream().readAllBytes()).strip();
        assertEquals(0, p.exitValue(), out);
        return out;
    }

    @Test
    void shouldNameTheCommitAndMarkADirtyTree(@TempDir Path repo) throws Exception {
        run(repo, "init", "-q");
        Files.writeString(repo.resolve("a.txt"), "one\n");
        run(repo, "add", "a.txt");
        run(repo, "commit", "-q", "-m", "first");
        String head = run(repo, "rev-parse", "--short", "HEAD");

        assertEquals(head, Provenance.commit(repo));
        Files.writeString(repo.resolve("a.txt"), "two\n");
        assertEquals(head + "-dirty", Provenance.commit(repo));
    }

    @Test
    void shouldSayWhyTheCommitIsUnknownOutsideARepository(@TempDir Path plain) {
        String commit = Provenance.commit(plain);

        assertTrue(commit.startsWith("unknown (git rev-parse --short HEAD failed in " + plain), commit);
    }
}
