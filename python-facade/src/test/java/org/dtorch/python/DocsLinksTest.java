package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every relative link of README.md and of the Markdown files under docs/ resolves: the file or folder exists, and a
 * {@code #section} names a heading of the target (GitHub's anchors: lower case, punctuation dropped, spaces as
 * hyphens). Links to other sites are not fetched.
 */
class DocsLinksTest {
    private static final Pattern LINK = Pattern.compile("\\[[^\\]]*\\]\\(([^)\\s]+)\\)");
    private static final Pattern FENCE = Pattern.compile("^\\s*```");

    @Test
    void shouldResolveEveryRelativeLinkOfTheReadmeAndTheDocs() throws IOException {
        Path root = RepositoryPaths.resolve("");
        List<Path> pages = new ArrayList<>();
        pages.add(root.resolve("README.md"));
        try (Stream<Path> docs = Files.walk(root.resolve("docs"))) {
            docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
        }
        List<String> broken = new ArrayList<>();
        for (Path page : pages) {
            int lineNumber = 0;
            boolean inFence = false;
            for (String line : Files.readAllLines(page)) {
                lineNumber++;
                if (FENCE.matcher(line).find()) {
                    inFence = !inFence;
                }
                if (inFence) {
                    continue;
                }
                Matcher m = LINK.matcher(line);
                while (m.find()) {
                    String problem = check(page, m.group(1));
                    if (problem != null) {
                        broken.add(root.relativize(page) + ":" + lineNumber + ": " + m.group(1) + " (" + problem + ")");
                    }
                }
            }
        }
        assertTrue(pages.size() > 1, "no docs found under " + root.resolve("docs"));
        assertTrue(broken.isEmpty(), "broken links:\n" + String.join("\n", broken));
    }

    /** Why {@code target}, linked from {@code page}, does not resolve; null when it does or is not relative. */
    private static String check(Path page, String target) throws IOException {
        if (target.matches("^[a-zA-Z][a-zA-Z0-9+.-]*:.*")) {
            return null; // https:, mailto: and the like
        }
        int hash = target.indexOf('#');
        String file = hash < 0 ? target : target.substring(0, hash);
        String anchor = hash < 0 ? null : target.substring(hash + 1);
        Path resolved = file.isEmpty() ? page : page.getParent().resolve(file).normalize();
        if (!Files.exists(resolved)) {
            return "no such file";
        }
        if (anchor != null && resolved.toString().endsWith(".md") && !anchors(resolved).contains(anchor)) {
            return "no heading with that anchor in " + resolved.getFileName();
        }
        return null;
    }

    /** The anchors GitHub gives the headings of a Markdown file. */
    static Set<String> anchors(Path markdown) throws IOException {
        Set<String> anchors = new HashSet<>();
        boolean inFence = false;
        for (String line : Files.readAllLines(markdown)) {
            if (FENCE.matcher(line).find()) {
                inFence = !inFence;
            }
            if (!inFence && line.startsWith("#")) {
                String title = line.replaceFirst("^#+\\s*", "").strip();
                String slug = title.toLowerCase(Locale.ROOT).replaceAll("[^\\p{L}\\p{N} _-]", "").replace(' ', '-');
                String unique = slug;
                for (int n = 1; !anchors.add(unique); n++) {
                    unique = slug + "-" + n;
                }
            }
        }
        return anchors;
    }
}
