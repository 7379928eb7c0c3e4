package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.runtime.process.JvmCommand;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The README's main job, {@code ./dtorch run examples/python/quickstart.py}, run as a user runs it: the launcher's
 * main in a JVM of its own, from the repository root, with its exit status and printed results checked. The two
 * losses it prints are recomputed here with plain libtorch on one device, from the same seeded draws.
 */
class QuickstartTest {
    private static final Path ROOT = Path.of("").toAbsolutePath().getParent();
    private static final String SCRIPT = "examples/python/quickstart.py";
    private static final Duration DEADLINE = Duration.ofMinutes(8);

    @Test
    @Timeout(600)
    void shouldRunTheReadmesMainJobAndPrintTheLossesOfPlainTorch() throws Exception {
        assertTrue(Files.isReadable(ROOT.resolve(SCRIPT)), "no " + SCRIPT + " under " + ROOT);
        // The child inherits the build's java.io.tmpdir (target/tmp), where GraalPy unpacks its files.
        Files.createDirectories(Path.of(System.getProperty("java.io.tmpdir")));
        JvmCommand.Outcome run = JvmCommand.of(Launcher.class.getName(), List.of("run", SCRIPT), Map.of(), List.of("-Xmx1g"))
            .runToCompletion(ROOT, DEADLINE);
        String out = run.output();
        assertTrue(run.finished(), "./dtorch run " + SCRIPT + " did not finish within " + DEADLINE + "; output so far:\n" + out);
        assertEquals(0, run.exitStatus(), "./dtorch run " + SCRIPT + " failed:\n" + out);

        assertTrue(out.contains("mesh: DeviceMesh(cpu, [[0, 1], [2, 3]], dims=[dp, tp])"), out);
        // Column-parallel linear: [S(0), R] x [R, S(0)] weight -> hidden split by batch and by feature.
        assertTrue(out.contains("h: Tensor(shape=(8, 64), dtype=torch.float32") && out.contains("placements=(Shard(dim=0), Shard(dim=1)))"), out);
        // Row-parallel linear: contracting the tp-split feature leaves partial sums over tp.
        assertTrue(out.contains("y (partial over tp): (Shard(dim=0), Partial(sum))"), out);
        double[] expected = lossesOfPlainTorch();
        assertEquals(expected[0], printed(out, "loss before the step:"), 2e-6 + 1e-5 * expected[0], out);
        assertEquals(expected[1], printed(out, "loss after the step:"), 2e-6 + 1e-5 * expected[1], out);
        assertTrue(expected[1] < expected[0], "plain torch says the step does not lower the loss: " + expected[0] + " -> " + expected[1]);
        assertTrue(out.lines().anyMatch("OK"::equals), out);
    }

    /** The number printed after {@code label} at the start of a line of {@code out}. */
    static double printed(String out, String label) {
        Matcher m = Pattern.compile("^" + Pattern.quote(label) + "\\s+(-?[0-9.]+)$", Pattern.MULTILINE).matcher(out);
        assertTrue(m.find(), "no line '" + label + " <number>' in:\n" + out);
        return Double.parseDouble(m.group(1));
    }

    /**
     * The script's computation on one device. {@code manual_seed(0)} makes the k-th random factory draw the whole
     * tensor from a generator seeded with {@code 0 * 1000003 + k}: x, w1, w2 are the draws 1, 2, 3. Then
     * {@code h = gelu(x w1^T)}, {@code y = h w2^T}, {@code loss = mean(y^2)} (the target is zero), one step
     * {@code w2 -= 0.1 * (2 / N) y^T h} and the loss again.
     */
    static double[] lossesOfPlainTorch() {
        try (Tensor x = randn(1, 8, 32);
             Tensor w1Raw = randn(2, 64, 32);
             Tensor w1 = w1Raw.div(new Scalar(Math.sqrt(32)));
             Tensor w2Raw = randn(3, 16, 64);
             Tensor w2 = w2Raw.div(new Scalar(Math.sqrt(64)));
             Tensor w1t = w1.t();
             Tensor pre = x.matmul(w1t);
             Tensor h = torch.gelu(pre);
             Tensor w2t = w2.t();
             Tensor y = h.matmul(w2t);
             Tensor ySquared = y.mul(y);
             Tensor loss = ySquared.mean();
             Tensor gradY = y.mul(new Scalar(2.0 / (8 * 16)));
             Tensor gradYt = gradY.t();
             Tensor gradW2 = gradYt.matmul(h);
             Tensor step = gradW2.mul(new Scalar(0.1));
             Tensor w2New = w2.sub(step);
             Tensor w2NewT = w2New.t();
             Tensor y2 = h.matmul(w2NewT);
             Tensor y2Squared = y2.mul(y2);
             Tensor lossAfter = y2Squared.mean()) {
            return new double[] {loss.item_double(), lossAfter.item_double()};
        }
    }

    private static Tensor randn(long seed, long... shape) {
        try (Generator generator = torch.make_generator_cpu(seed); TensorOptions options = new TensorOptions()) {
            return torch.randn(shape, new GeneratorOptional(generator), options);
        }
    }
}
