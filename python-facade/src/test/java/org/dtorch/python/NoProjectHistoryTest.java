package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The shipped code and the user docs give reasons, not pointers into the project's history that a reader cannot look
 * up: no "decision 141", "decisions 205 and 252", "issue 15", "seed 4.5", "the seed's ..." and no docs/decisions.md
 * (the kept design record is docs/adr/). Scanned: every module's {@code src/main}, the launcher {@code dtorch},
 * {@code tools/}, {@code .ci/run}, README.md and the Markdown under docs/. A pointer split over two lines of a comment
 * counts too.
 */
class NoProjectHistoryTest {
    /**
     * A number after "decision(s)" or "issue(s)", also across a comment's line break; a section number after "seed" (one
     * or two digits, "seed 4.5", where a random generator's seed, "seed 4000620", has more); "the seed"; decisions.md.
     */
    static final Pattern HISTORY = Pattern.compile(
        "\\b(?:decisions?|issues?)\\s+(?:(?:\\*|//|#)\\s*)?#?\\d+|\\bseed\\s+\\d{1,2}(?:\\.\\d+)*(?![\\d])|\\bthe\\s+seed\\b"
            + "|\\bdecisions\\.md\\b",
        Pattern.CASE_INSENSITIVE);

    @Test
    void shouldFindNoPointerIntoTheProjectsHistoryInShippedCodeOrUserDocs() throws IOException {
        Path root = RepositoryPaths.resolve("");
        List<Path> files = scannedFiles(root);
        List<String> found = new ArrayList<>();
        for (Path file : files) {
            String text = readText(file);
            if (text == null) {
                continue; // not UTF-8 text (an image, a binary)
            }
            Matcher m = HISTORY.matcher(text);
            while (m.find()) {
                int line = 1 + (int) text.substring(0, m.start()).chars().filter(c -> c == '\n').count();
                found.add(root.relativize(file) + ":" + line + ": '" + m.group().replaceAll("\\s+", " ") + "'");
            }
        }
        assertTrue(files.size() > 100, "too few files scanned under " + root + ": " + files.size());
        assertTrue(found.isEmpty(), "pointers into the project's history; give the reason itself (or cite docs/adr/NNNN-*.md):\n"
            + String.join("\n", found));
    }

    @Test
    void shouldRecognizeEveryFormOfAPointerAndNothingElse() {
        List<String> pointers = List.of("(decision 141)", "decisions 205 and 252", "(decisions\n * 200 and 201)",
            "Issue 15's runtime", "issue #16", "seed 4.5", "as the seed does", "the seed's order", "see docs/decisions.md");
        List<String> innocent = List.of("manual_seed(seed)", "a randn seed gives the same values", "seeded as rand() is",
            "the operators issued since", "one decision per call", "in issue order", "docs/adr/0021-seeded-random-factories.md",
            "programs from seed 1000000", "seed 4000620: MISMATCH");
        for (String text : pointers) {
            assertTrue(HISTORY.matcher(text).find(), "not recognized: " + text);
        }
        for (String text : innocent) {
            assertFalse(HISTORY.matcher(text).find(), "taken for a pointer: " + text);
        }
    }

    /** Every module's {@code src/main}, {@code dtorch}, {@code tools/}, {@code .ci/run}, README.md and docs/**.md. */
    private static List<Path> scannedFiles(Path root) throws IOException {
        List<Path> files = new ArrayList<>();
        try (Stream<Path> modules = Files.list(root)) {
            for (Path module : modules.filter(m -> Files.isDirectory(m.resolve("src/main"))).sorted().toList()) {
                addTree(module.resolve("src/main"), files, p -> true);
            }
        }
        addTree(root.resolve("tools"), files, p -> true);
        addTree(root.resolve("docs"), files, p -> p.toString().endsWith(".md"));
        for (String single : List.of("dtorch", ".ci/run", "README.md")) {
            Path file = root.resolve(single);
            if (Files.isRegularFile(file)) {
                files.add(file);
            }
        }
        return files;
    }

    private static void addTree(Path dir, List<Path> files, Predicate<Path> keep) throws IOException {
        if (!Files.isDirectory(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.filter(Files::isRegularFile).filter(keep).sorted().forEach(files::add);
        }
    }

    private static String readText(Path file) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        try {
            return StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }
}
