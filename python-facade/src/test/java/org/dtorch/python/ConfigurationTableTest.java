package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * docs/configuration.md names every system property and environment variable the code reads, and nothing else.
 *
 * <p>What the code reads is found in the main sources of the modules a user runs (benchmarks, whose {@code bench.*}
 * options their own page documents, are left out): a system property is a string literal {@code "dtorch.a.b"} of two
 * or more segments after {@code dtorch.} ({@code "dtorch.bridge"} and its like are names of polyglot bindings, not
 * properties); an environment variable is an upper-case literal with an underscore ({@code "DTORCH_TOKEN"}), except the
 * control frames' names a decoder expects ({@code expectEnd("NODE_HELLO")}), an upper-case literal paired with a
 * launcher option ({@code "--nnodes", "NNODES"}: the option's variable), one read by {@code getenv("...")}, and a
 * variable the launcher scripts read with a default ({@code ${DTORCH_JIT:-on}}). What the page names is the first column of the rows of its sections
 * "System properties" and "Environment variables".
 */
class ConfigurationTableTest {
    private static final List<String> MODULES = List.of("runtime-core", "graph-ops", "polyglot-bindings", "python-facade", "examples");
    private static final List<String> SCRIPTS = List.of("dtorch", ".ci/run");
    private static final Pattern PROPERTY = Pattern.compile("\"(dtorch\\.[A-Za-z0-9_]+\\.[A-Za-z0-9_.]*[A-Za-z0-9_])\"");
    private static final Pattern VARIABLE = Pattern.compile("\"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\"");
    private static final Pattern OPTION_VARIABLE = Pattern.compile("\"--[a-z-]+\",\\s*\"([A-Z][A-Z0-9_]*)\"");
    private static final Pattern GETENV = Pattern.compile("getenv\\(\"([A-Z][A-Z0-9_]*)\"\\)");
    private static final Pattern FRAME_NAME = Pattern.compile("expectEnd\\(\"([A-Z_0-9]+)\"\\)");
    private static final Pattern SCRIPT_VARIABLE = Pattern.compile("\\$\\{([A-Z][A-Z0-9_]*):-");
    private static final Pattern CODE = Pattern.compile("`([^`]+)`");

    @Test
    void shouldListEverySystemPropertyTheCodeReadsAndNoOther() throws IOException {
        Set<String> read = new TreeSet<>();
        for (String source : sources()) {
            collect(PROPERTY, source, read);
        }
        assertFalse(read.isEmpty(), "no dtorch.* property found in the main sources: is the scan looking in the right place?");
        assertEquals(read, documented("System properties"),
            "docs/configuration.md's system properties differ from what the code reads (left: the code; right: the page)");
    }

    @Test
    void shouldListEveryEnvironmentVariableTheCodeReadsAndNoOther() throws IOException {
        Set<String> read = new TreeSet<>();
        for (String source : sources()) {
            Set<String> frames = new TreeSet<>();
            collect(FRAME_NAME, source, frames);
            Set<String> names = new TreeSet<>();
            collect(VARIABLE, source, names);
            names.removeAll(frames);
            collect(OPTION_VARIABLE, source, names);
            collect(GETENV, source, names);
            read.addAll(names);
        }
        for (String script : SCRIPTS) {
            collect(SCRIPT_VARIABLE, Files.readString(RepositoryPaths.resolve(script)), read);
        }
        assertFalse(read.isEmpty(), "no environment variable found in the sources: is the scan looking in the right place?");
        assertEquals(read, documented("Environment variables"),
            "docs/configuration.md's environment variables differ from what the code reads (left: the code; right: the page)");
    }

    /** The text of every main Java source of {@link #MODULES}. */
    private static List<String> sources() throws IOException {
        List<Path> files = new java.util.ArrayList<>();
        for (String module : MODULES) {
            try (Stream<Path> walk = Files.walk(RepositoryPaths.resolve(module + "/src/main/java"))) {
                walk.filter(p -> p.toString().endsWith(".java")).forEach(files::add);
            }
        }
        List<String> texts = new java.util.ArrayList<>();
        for (Path file : files) {
            texts.add(Files.readString(file));
        }
        return texts;
    }

    private static void collect(Pattern pattern, String text, Set<String> into) {
        Matcher m = pattern.matcher(text);
        while (m.find()) {
            into.add(m.group(1));
        }
    }

    /** The names in the first column of the table rows under the heading {@code ## section} of docs/configuration.md. */
    static Set<String> documented(String section) throws IOException {
        List<String> lines = Files.readAllLines(RepositoryPaths.resolve("docs/configuration.md"));
        Set<String> names = new TreeSet<>();
        boolean inSection = false;
        for (String line : lines) {
            if (line.startsWith("## ")) {
                inSection = line.substring(3).strip().equals(section);
            } else if (inSection && line.startsWith("|") && !line.startsWith("|---")) {
                String first = line.substring(1, line.indexOf('|', 1));
                collect(CODE, first, names);
            }
        }
        assertFalse(names.isEmpty(), "docs/configuration.md has no table under '## " + section + "'");
        return names;
    }
}
