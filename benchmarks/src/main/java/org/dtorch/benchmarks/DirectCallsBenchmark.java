package org.dtorch.benchmarks;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.aten.AtenCall;

/**
 * The host time of one call of a decode step's frequent operators on the Llama example's tiny shapes, through
 * {@link AtenCall#call} (libtorch's unboxed function where the operator has one) against {@link AtenCall#callBoxed}
 * (the dispatcher's boxed call), on one thread, each result closed at once: rounds of each in turn, the median of the
 * rounds. On a CUDA device the calls only launch; the device is synchronized at the end of each round.
 *
 * <p>{@code java ... org.dtorch.benchmarks.DirectCallsBenchmark [cpu|cuda] [calls per round] [rounds]}
 *
 * <p>Not thread-safe: a main program.
 */
public final class DirectCallsBenchmark {
    private DirectCallsBenchmark() {
    }

    private record Case(String name, AtenCall call, List<Tensor> inputs) {
    }

    /** Prints a markdown table: operator, us per call unboxed and boxed, and their ratio. */
    public static void main(String[] args) {
        boolean cuda = args.length > 0 && args[0].equals("cuda");
        int calls = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 7;
        Device device = cuda ? Device.cuda(0) : Device.cpu(0);
        if (cuda) {
            org.dtorch.core.device.Cuda.loadNatives();
        }
        List<Tensor> owned = new ArrayList<>();
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, device)) {
            Tensor x = keep(owned, torch.randn(new long[] {1, 1, 128}, options));
            Tensor w = keep(owned, torch.randn(new long[] {384, 128}, options));
            Tensor q = keep(owned, torch.randn(new long[] {1, 8, 1, 16}, options));
            Tensor k = keep(owned, torch.randn(new long[] {1, 4, 20, 16}, options));
            Tensor norm = keep(owned, torch.randn(new long[] {128}, options));
            List<Case> cases = List.of(
                new Case("linear", AtenCall.of("linear", "T,T", null, null), List.of(x, w)),
                new Case("silu", AtenCall.of("silu", "T", (Object) null), List.of(x)),
                new Case("transpose", AtenCall.of("transpose", "T,i,i", null, 1L, 2L), List.of(q)),
                new Case("view", AtenCall.of("view", "T,[i]", null, List.of(1L, 1L, 8L, 16L)), List.of(x)),
                new Case("slice", AtenCall.of("slice", "T,i,i,i,i", null, 3L, 0L, 8L, 1L), List.of(q)),
                new Case("rms_norm", AtenCall.of("rms_norm", "T,[i],T,f", null, List.of(128L), null, 1e-5), List.of(x, norm)),
                new Case("scaled_dot_product_attention", AtenCall.of("scaled_dot_product_attention", "T,T,T|enable_gqa=b", null, null, null,
                    true), List.of(q, k, k)));
            System.out.println("| operator (" + device + ") | unboxed, us per call | boxed, us per call | boxed / unboxed |");
            System.out.println("|---|---|---|---|");
            for (Case c : cases) {
                double[] direct = new double[rounds];
                double[] boxed = new double[rounds];
                time(c, calls, true, cuda);
                time(c, calls, false, cuda);
                for (int r = 0; r < rounds; r++) {
                    direct[r] = time(c, calls, true, cuda);
                    boxed[r] = time(c, calls, false, cuda);
                }
                double d = median(direct);
                double b = median(boxed);
                System.out.printf("| %s | %.2f | %.2f | %.2f |%n", c.name(), d, b, b / d);
            }
        } finally {
            owned.forEach(Tensor::close);
        }
    }

    private static Tensor keep(List<Tensor> owned, Tensor t) {
        owned.add(t);
        return t;
    }

    /** Microseconds per call over one round. */
    private static double time(Case c, int calls, boolean direct, boolean cuda) {
        long start = System.nanoTime();
        for (int i = 0; i < calls; i++) {
            List<Tensor> out = direct ? c.call().call(c.inputs()) : c.call().callBoxed(c.inputs());
            out.forEach(Tensor::close);
        }
        if (cuda) { // a copy to the host waits for every kernel launched before it
            try (Tensor s = c.inputs().getFirst().sum(); Tensor host = TorchTensors.to(s, Device.cpu(0))) {
                host.numel();
            }
        }
        return (System.nanoTime() - start) / 1e3 / calls;
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
