package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.StringWriter;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.dtorch.api.DTorchOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The README's examples run as pasted: every fenced block right after a {@code <!-- runnable -->} line is extracted
 * and run, the Python one as {@code ./dtorch run} runs a script (a runtime of 4 CPU devices and a {@link
 * org.dtorch.polyglot.PythonHost}, as {@link PythonScriptsTest} does), the Java one compiled with {@code javax.tools}
 * against the test class path and its {@code main} called. Each example compares its result with plain torch on one
 * device itself; the test checks that it ran to the end and said so. The README's test command, which CI runs, is
 * checked to be the one {@code .ci/run} calls.
 */
class ReadmeExamplesTest {
    private static final String MARKER = "<!-- runnable -->";
    private static final Pattern PUBLIC_CLASS = Pattern.compile("^public (?:final )?class (\\w+)", Pattern.MULTILINE);

    /** A fenced code block: its language and its text. */
    record Block(String language, String code) {
    }

    @Test
    @Timeout(300)
    void shouldRunTheReadmesPythonExampleAsPasted() throws IOException {
        String code = onlyBlock("python");
        Path dir = Files.createDirectories(Path.of("target", "readme-examples"));
        Path script = dir.resolve("example.py");
        Files.writeString(script, code, StandardCharsets.UTF_8);
        PythonScriptsTest.runScript(script, DTorchOptions.builder().devices(4).timeout(Duration.ofSeconds(60)).build());
    }

    @Test
    @Timeout(300)
    void shouldCompileAndRunTheReadmesJavaExampleAsPasted() throws Exception {
        String code = onlyBlock("java");
        Matcher name = PUBLIC_CLASS.matcher(code);
        assertTrue(name.find(), "the README's Java example declares no public class:\n" + code);
        Path dir = Files.createTempDirectory(Files.createDirectories(Path.of("target")), "readme-java");
        Path source = dir.resolve(name.group(1) + ".java");
        Files.writeString(source, code, StandardCharsets.UTF_8);

        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        StringWriter diagnostics = new StringWriter();
        boolean compiled = javac.getTask(diagnostics, null, null,
            List.of("-classpath", System.getProperty("java.class.path"), "-d", dir.toString(), "-Xlint:none"), null,
            javac.getStandardFileManager(null, null, StandardCharsets.UTF_8).getJavaFileObjects(source.toFile())).call();
        assertTrue(compiled, "the README's Java example does not compile:\n" + diagnostics);

        String out = runMain(dir, name.group(1));
        assertTrue(out.contains("DTensor(float32[8, 32] [P(sum)]"), "the example's partial result is not printed:\n" + out);
        assertTrue(out.contains("matches one-device torch: true"), "the example does not match plain torch:\n" + out);
    }

    @Test
    void shouldShowTheTestCommandThatCiRuns() throws IOException {
        List<String> readme = Files.readAllLines(RepositoryPaths.resolve("README.md"));
        List<String> ci = Files.readAllLines(RepositoryPaths.resolve(".ci/run"));
        assertTrue(readme.contains("mvn -B verify"), "README.md must show the test command 'mvn -B verify' on a line of its own");
        // The README's command verbatim, first; then the slow tests it leaves out, which the README's Tests section names.
        assertEquals(List.of("mvn -B verify", "mvn -B verify -Dgroups=slow"), ci.stream().map(String::strip).filter(l -> l.startsWith("mvn "))
            .toList(), ".ci/run must run the README's test command, then the slow tests");
        assertTrue(String.join("\n", readme).contains("`mvn -B verify -Dgroups=slow`"), "README.md must say how the slow tests run");
    }

    /** The one runnable block of {@code language} in the README; fails unless there is exactly one. */
    private static String onlyBlock(String language) throws IOException {
        List<Block> blocks = runnableBlocks(Files.readString(RepositoryPaths.resolve("README.md")));
        List<String> found = blocks.stream().filter(b -> b.language().equals(language)).map(Block::code).toList();
        assertEquals(1, found.size(), "README.md should have exactly one " + MARKER + " ```" + language + " block, found "
            + found.size());
        return found.getFirst();
    }

    /** The fenced blocks whose opening fence is the first non-blank line after a {@value #MARKER} line. */
    static List<Block> runnableBlocks(String markdown) {
        List<String> lines = markdown.lines().toList();
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            if (!lines.get(i).strip().equals(MARKER)) {
                continue;
            }
            int open = i + 1;
            while (open < lines.size() && lines.get(open).isBlank()) {
                open++;
            }
            assertTrue(open < lines.size() && lines.get(open).startsWith("```"),
                "README.md line " + (i + 1) + ": " + MARKER + " must be followed by a fenced code block");
            String language = lines.get(open).substring(3).strip();
            StringBuilder code = new StringBuilder();
            int close = open + 1;
            while (close < lines.size() && !lines.get(close).startsWith("```")) {
                code.append(lines.get(close)).append('\n');
                close++;
            }
            assertTrue(close < lines.size(), "README.md line " + (open + 1) + ": the runnable block is not closed");
            blocks.add(new Block(language, code.toString()));
            i = close;
        }
        return blocks;
    }

    /** Calls {@code className.main(new String[0])} from classes in {@code dir}, returning what it printed. */
    private static String runMain(Path dir, String className) throws Exception {
        ByteArrayOutputStream output = new ByteArrayOutputStream();
        PrintStream original = System.out;
        try (URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()}, ReadmeExamplesTest.class.getClassLoader());
             PrintStream capture = new PrintStream(output, true, StandardCharsets.UTF_8)) {
            Method main = loader.loadClass(className).getMethod("main", String[].class);
            System.setOut(capture);
            main.invoke(null, (Object) new String[0]);
        } finally {
            System.setOut(original);
        }
        String out = output.toString(StandardCharsets.UTF_8);
        original.print(out);
        return out;
    }
}
