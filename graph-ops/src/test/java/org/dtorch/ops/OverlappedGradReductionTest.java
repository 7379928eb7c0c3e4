package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.communication.group.ReductionBuckets;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The data-parallel backward with its gradients' reduction issued during the pass: a bucket of gradients is all-reduced
 * as soon as its gradients are final, while the devices go on with the backward, and the gradients are bitwise those
 * of the pass that reduces everything at its end (and torch's on one device), on four devices in threads and in worker
 * processes. The order shows in the trace: with the early reduction a device runs derivatives after the first
 * gradient reduction; without it the reductions come after the last derivative.
 */
@Timeout(300)
class OverlappedGradReductionTest {
    private static final String EARLY = "dtorch.autograd.earlyGradReduction";
    private static final int LAYERS = 5;
    /** 512 x 512 floats: each weight's gradient is one MiB, a bucket of its own at -Ddtorch.comm.bucketMiB=1. */
    private static final long WIDTH = 512;

    @TempDir
    Path dir;

    /** The gradients of the model's weights on one device, with torch's autograd. */
    private record Model(Tensor x, List<Tensor> weights) implements AutoCloseable {
        static Model random() {
            torch.manual_seed(7);
            List<Tensor> weights = new ArrayList<>();
            for (int i = 0; i < LAYERS; i++) {
                try (Tensor w = torch.randn(WIDTH, WIDTH)) {
                    weights.add(w.div(new org.bytedeco.pytorch.Scalar(Math.sqrt(WIDTH))));
                }
            }
            return new Model(torch.randn(8, WIDTH), weights);
        }

        List<Tensor> torchGradients() {
            List<Tensor> leaves = new ArrayList<>();
            Tensor h = x;
            for (Tensor w : weights) {
                Tensor leaf = w.detach().requires_grad_(true);
                leaves.add(leaf);
                h = h.matmul(leaf).tanh();
            }
            h.mean().backward();
            List<Tensor> grads = new ArrayList<>();
            for (Tensor leaf : leaves) {
                grads.add(leaf.grad().clone()); // a copy of our own: the leaf's grad is a reference into the leaf
            }
            return grads;
        }

        /** The model on {@code dt}'s four devices: weights replicated, the batch's rows split; the weights' gradients. */
        List<Tensor> distributedGradients(DTorch dt) {
            DeviceMesh line = dt.initDeviceMesh(new int[] {4});
            List<DTensor> leaves = new ArrayList<>();
            DTensor h = dt.tensor(x, line, Placement.shard(0));
            for (Tensor w : weights) {
                DTensor leaf = dt.tensor(w, line, Placement.replicate()).requiresGrad_(true);
                leaves.add(leaf);
                h = h.matmul(leaf).tanh();
            }
            h.mean().backward();
            List<Tensor> out = new ArrayList<>();
            for (DTensor leaf : leaves) {
                assertEquals(List.of(Placement.replicate()), leaf.grad().placements(), "a weight's gradient is replicated");
                out.add(leaf.grad().toTorch());
            }
            return out;
        }

        @Override
        public void close() {
            x.close();
            weights.forEach(Tensor::close);
        }
    }

    /** Runs {@code body} with the system properties {@code set}, then restores what was there. */
    private static <T> T withProperties(Map<String, String> set, java.util.function.Supplier<T> body) {
        Map<String, String> before = new java.util.HashMap<>();
        set.keySet().forEach(k -> before.put(k, System.getProperty(k)));
        set.forEach(System::setProperty);
        try {
            return body.get();
        } finally {
            before.forEach((k, v) -> {
                if (v == null) {
                    System.clearProperty(k);
                } else {
                    System.setProperty(k, v);
                }
            });
        }
    }

    private static void assertSameGradients(List<Tensor> want, List<Tensor> got, String what, boolean exactly) {
        assertEquals(want.size(), got.size());
        for (int i = 0; i < want.size(); i++) {
            boolean same = exactly ? torch.equal(want.get(i), got.get(i)) : torch.allclose(want.get(i), got.get(i), 1e-4, 1e-6, false);
            double diff;
            try (Tensor d = want.get(i).sub(got.get(i)); Tensor a = d.abs(); Tensor m = a.max()) {
                diff = m.item_double();
            }
            assertTrue(same, what + ": the gradient of weight " + i + " differs by up to " + diff);
        }
    }

    /** The names of the kernels device 0 ran (its row is process 1), in the order it ran them, from a Chrome trace. */
    private static List<String> kernelsOfDeviceZero(Path trace) throws Exception {
        JsonNode root = new ObjectMapper().readTree(trace.toFile());
        List<JsonNode> kernels = new ArrayList<>();
        for (JsonNode e : root.get("traceEvents")) {
            if (e.path("ph").asText().equals("X") && e.path("cat").asText().equals("kernel") && e.path("pid").asInt() == 1) {
                kernels.add(e);
            }
        }
        kernels.sort(Comparator.comparing(e -> e.get("ts").decimalValue()));
        return kernels.stream().map(e -> e.get("name").asText()).toList();
    }

    /** The gradients of a traced runtime of four devices (threads or processes), and device 0's kernels. */
    private record Traced(List<Tensor> gradients, List<String> kernels, long allReduces) {
    }

    private Traced traced(Model model, boolean early, boolean processes) {
        Path file = dir.resolve("trace-" + early + "-" + processes + ".json");
        return withProperties(Map.of(EARLY, String.valueOf(early), ReductionBuckets.BUCKET_PROPERTY, "1"), () -> {
            List<Tensor> gradients;
            long allReduces;
            try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(processes).trace(file).build())) {
                Function<DTorch, Long> count = d -> d.runtime().groups().collectiveCounter().snapshot()
                    .getOrDefault(CollectiveKind.ALL_REDUCE, 0L);
                long before = processes ? 0 : count.apply(dt);
                gradients = model.distributedGradients(dt);
                allReduces = processes ? -1 : count.apply(dt) - before;
            }
            try {
                return new Traced(gradients, kernelsOfDeviceZero(file), allReduces);
            } catch (Exception e) {
                throw new AssertionError("reading the trace " + file, e);
            }
        });
    }

    /** Derivative kernels (the matmuls of the backward) that device 0 ran after its first gradient reduction. */
    private static long derivativesAfterTheFirstReduction(List<String> kernels) {
        int first = kernels.indexOf("redistribute");
        assertTrue(first >= 0, "device 0 ran no gradient reduction: " + kernels);
        return kernels.subList(first, kernels.size()).stream().filter(k -> k.equals("matmul")).count();
    }

    private void shouldOverlapAndMatch(boolean processes) {
        try (Model model = Model.random()) {
            List<Tensor> want = model.torchGradients();
            Traced overlapped = traced(model, true, processes);
            Traced atTheEnd = traced(model, false, processes);
            assertSameGradients(atTheEnd.gradients(), overlapped.gradients(), "the early reduction against the reduction at the end", true);
            assertSameGradients(want, overlapped.gradients(), "the early reduction against torch on one device", false);
            assertTrue(derivativesAfterTheFirstReduction(overlapped.kernels()) > 0,
                "with the early reduction, device 0 runs derivatives after the first bucket's all-reduce: " + overlapped.kernels());
            assertEquals(0, derivativesAfterTheFirstReduction(atTheEnd.kernels()),
                "without it, every reduction comes after the last derivative: " + atTheEnd.kernels());
            if (!processes) {
                // The counter counts each device's calls: one batched reduction at the end, one per one-MiB bucket early.
                assertEquals(LAYERS * atTheEnd.allReduces(), overlapped.allReduces(), "every weight's gradient is a bucket of its own");
            }
        }
    }

    @Test
    void shouldReduceGradientBucketsDuringTheBackwardToTheSameValuesInThreads() {
        shouldOverlapAndMatch(false);
    }

    /** Slow: four worker JVMs of its own (the bucket size is the workers' property); threads run the same worker loop. */
    @Test
    @Tag("multiprocess")
    @Tag("slow")
    void shouldReduceGradientBucketsDuringTheBackwardToTheSameValuesInWorkerProcesses() {
        shouldOverlapAndMatch(true);
    }
}
