package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The model examples as a user runs them, {@code ./dtorch run [flags] examples/python/llama.py | dit.py [args]}, through
 * the launcher's main in this JVM: each checks itself against one device's torch with the same weights and prints a
 * line starting {@code OK:} only when the tokens, logits or latents agree. Every build runs each example once in
 * threads, shortened (4 new tokens, where each one after the first already decodes from the key-value cache; 2 sampling
 * steps, where the second already starts from a sampled latent); the other attention and the worker processes, at the
 * examples' full length, are tagged {@code slow}.
 */
class ModelExamplesTest {

    @Test
    @Timeout(600)
    void shouldGenerateTheTokensOfOneDeviceWithTheTensorParallelLlama() throws IOException {
        String out = run(List.of(), "examples/python/llama.py", "--new-tokens", "4");
        assertTrue(out.contains("tok_embeddings.weight: (Shard(dim=0),)  layers.0.attention.wq.weight: (Shard(dim=0),)"), out);
        assertTrue(out.contains("OK: 4 generated tokens equal one device's, last logits within 1e-4"), out);
    }

    @Test
    @Timeout(600)
    void shouldSampleTheLatentOfOneDeviceWithCfgAndUlyssesParallelDit() throws IOException {
        String out = run(List.of(), "examples/python/dit.py", "--steps", "2");
        assertTrue(out.contains("placements=(Replicate(), Shard(dim=0), Replicate(), Shard(dim=1), Replicate(), Replicate())"), out);
        assertTrue(out.contains("OK: 2 steps of CFG x ulysses on (1, 2, 1, 2, 1, 1) match one device to 1e-4"), out);
    }

    @Test
    @Tag("slow")
    @Timeout(600)
    void shouldSampleTheLatentOfOneDeviceWithCfgAndRingParallelDit() throws IOException {
        String out = run(List.of(), "examples/python/dit.py", "--attention", "ring");
        assertTrue(out.contains("OK: 4 steps of CFG x ring on (1, 2, 2, 1, 1, 1) match one device to 1e-4"), out);
    }

    @Test
    @Tag("slow")
    @Tag("multiprocess")
    @Timeout(900)
    void shouldRunBothModelsWithWorkerProcesses() throws IOException {
        String llama = run(List.of("--per-device-process"), "examples/python/llama.py");
        assertTrue(llama.contains("OK: 32 generated tokens equal one device's"), llama);
        String dit = run(List.of("--per-device-process"), "examples/python/dit.py");
        assertTrue(dit.contains("OK: 4 steps of CFG x ulysses"), dit);
    }

    /** The launcher's output of {@code run FLAGS SCRIPT ARGS}, after checking that it exited 0. */
    static String run(List<String> flags, String script, String... args) throws IOException {
        Path path = RepositoryPaths.resolve(script);
        assertTrue(Files.isReadable(path), "no " + path);
        Files.createDirectories(Path.of(System.getProperty("java.io.tmpdir")));
        List<String> command = new ArrayList<>(List.of("run"));
        command.addAll(flags);
        command.add(path.toString());
        command.addAll(List.of(args));
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream originalOut = System.out;
        PrintStream originalErr = System.err;
        int status;
        try (PrintStream capture = new PrintStream(captured, true, StandardCharsets.UTF_8)) {
            System.setOut(capture);
            System.setErr(capture);
            status = ScriptBytecode.launch(command.toArray(String[]::new));
        } finally {
            System.setOut(originalOut);
            System.setErr(originalErr);
        }
        String out = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, "./dtorch " + String.join(" ", command) + " failed:\n" + out);
        return out;
    }
}
