package org.dtorch.examples;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.api.SafeTensors;
import org.dtorch.api.SafeTensors.Layout;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;

/**
 * One decoder layer of a Llama-style model, tensor parallel on a 4-device mesh, its weights loaded from a safetensors
 * file through the Java API, against the same layer in plain torch on one device.
 *
 * <p>The weights carry the names {@code examples/python/llama.py} writes ({@code layers.0.attention.wq.weight}, ...):
 * {@code --weights FILE} loads that example's file ({@code llama.py --weights FILE} keeps it), and without the flag this
 * example writes random ones of the tiny configuration's shapes first. Each device reads only its shard: the query,
 * key, value, gate and up projections by output rows ({@code S(0)}: column parallel), the output and down projections
 * by input columns ({@code S(1)}: row parallel, a partial sum reduced by the residual add), the norms whole.
 * The layer is RMSNorm, grouped-query causal attention (no rotary embedding: the Python example has it), a residual,
 * RMSNorm and a SwiGLU MLP, on a prompt of 8 tokens.
 *
 * <p>{@code --device cpu|cuda} as {@link TensorParallelMlp}; {@code --per-device-process} runs every device in a worker JVM
 * of its own (each maps and reads its own shard there). Exits 1 when the result does not match torch.
 *
 * <p>Not thread-safe: a program entry point.
 */
public final class LlamaLayerTensorParallel {
    private static final String USAGE = "usage: LlamaLayerTensorParallel [--device cpu|cuda] [--per-device-process] [--weights FILE]";
    private static final String PREFIX = "layers.0.";
    private static final long DIM = 128;
    private static final long HEADS = 8;
    private static final long KV_HEADS = 4;
    private static final long HIDDEN = 344;
    private static final long TOKENS = 8;
    private static final double EPS = 1e-5;

    private LlamaLayerTensorParallel() {
    }

    /** Loads (or writes, then loads) the weights, runs the layer distributed and in torch, and compares. */
    public static void main(String[] args) throws IOException {
        String device = System.getProperty(TensorParallelMlp.DEVICE_PROPERTY, "cpu");
        Path weights = null;
        boolean processes = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--device" -> device = value(args, ++i);
                case "--per-device-process" -> processes = true;
                case "--weights" -> weights = Path.of(value(args, ++i));
                default -> throw new IllegalArgumentException("unknown argument '" + args[i] + "'; " + USAGE);
            }
        }
        if (weights == null) {
            weights = Files.createTempDirectory("dtorch-llama-layer-").resolve("layer.safetensors");
            writeRandomLayer(weights);
        }
        boolean cuda = TensorParallelMlp.deviceType(new String[] {"--device", device}).equals("cuda");
        DTorchOptions.Builder options = cuda ? DTorchOptions.builder().devices("cuda:4").sameDevice(true) : DTorchOptions.builder().devices(4);
        try (DTorch dt = DTorch.init(options.perDevicePerProcess(processes).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            SafeTensors.Loaded loaded = SafeTensors.loadWithReport(dt, List.of(weights), name -> layout(mesh, name), null, false);
            Map<String, Tensor> host = layerOnHost(weights);
            try (loaded; Tensor x = torch.randn(1, TOKENS, DIM)) {
                Map<String, DTensor> w = loaded.tensors();
                System.out.println("mesh " + mesh + "; weights " + weights + " (" + w.size() + " of the layer's tensors)");
                System.out.println("wq " + w.get(PREFIX + "attention.wq.weight") + "\nwo " + w.get(PREFIX + "attention.wo.weight"));
                DTensor out = layer(dt, dt.tensor(x, mesh, Placement.replicate()), w);
                try (Tensor got = out.toTorch(); Tensor want = layerInTorch(x, host)) {
                    double max;
                    try (Tensor difference = got.sub(want); Tensor abs = difference.abs(); Tensor top = abs.max()) {
                        max = top.item_double();
                    }
                    boolean close = torch.allclose(got, want, 1e-4, 1e-4, false);
                    System.out.printf("out %s%nmax |tensor parallel - single-device torch| = %.3g -> %s%n", out, max,
                        close ? "MATCH" : "MISMATCH");
                    if (!close) {
                        System.exit(1);
                    }
                }
            } finally {
                host.values().forEach(Tensor::close);
            }
        }
    }

    private static String value(String[] args, int i) {
        if (i >= args.length) {
            throw new IllegalArgumentException(args[i - 1] + " needs a value; " + USAGE);
        }
        return args[i];
    }

    /** Where each of layer 0's tensors goes; null leaves a tensor of the file (other layers, embeddings) unread. */
    static Layout layout(DeviceMesh mesh, String name) {
        if (!name.startsWith(PREFIX)) {
            return null;
        }
        String local = name.substring(PREFIX.length());
        return switch (local) {
            case "attention.wq.weight", "attention.wk.weight", "attention.wv.weight",
                 "feed_forward.w1.weight", "feed_forward.w3.weight" -> Layout.of(mesh, Placement.shard(0));
            case "attention.wo.weight", "feed_forward.w2.weight" -> Layout.of(mesh, Placement.shard(1));
            case "attention_norm.weight", "ffn_norm.weight" -> Layout.of(mesh, Placement.replicate());
            default -> null;
        };
    }

    /** The layer on distributed tensors: the same operators as {@link #layerInTorch}, the placements chosen by the weights. */
    static DTensor layer(DTorch dt, DTensor x, Map<String, DTensor> w) {
        long batch = x.shape()[0];
        long tokens = x.shape()[1];
        long headDim = DIM / HEADS;
        DTensor h = dt.aten(rmsNorm(), x, w.get(PREFIX + "attention_norm.weight")).getFirst();
        DTensor q = dt.linear(h, w.get(PREFIX + "attention.wq.weight")).view(batch, tokens, HEADS, headDim).transpose(1, 2);
        DTensor k = dt.linear(h, w.get(PREFIX + "attention.wk.weight")).view(batch, tokens, KV_HEADS, headDim).transpose(1, 2);
        DTensor v = dt.linear(h, w.get(PREFIX + "attention.wv.weight")).view(batch, tokens, KV_HEADS, headDim).transpose(1, 2);
        DTensor attention = dt.aten(attention(), q, k, v).getFirst().transpose(1, 2).reshape(batch, tokens, HEADS * headDim);
        DTensor residual = x.add(dt.linear(attention, w.get(PREFIX + "attention.wo.weight")));
        DTensor m = dt.aten(rmsNorm(), residual, w.get(PREFIX + "ffn_norm.weight")).getFirst();
        DTensor gated = dt.linear(m, w.get(PREFIX + "feed_forward.w1.weight")).silu().mul(dt.linear(m, w.get(PREFIX + "feed_forward.w3.weight")));
        return residual.add(dt.linear(gated, w.get(PREFIX + "feed_forward.w2.weight")));
    }

    /** The layer in plain torch on one device. */
    static Tensor layerInTorch(Tensor x, Map<String, Tensor> w) {
        long batch = x.size(0);
        long tokens = x.size(1);
        long headDim = DIM / HEADS;
        List<Tensor> owned = new ArrayList<>();
        try {
            Tensor h = keep(owned, rmsNorm().call(List.of(x, w.get(PREFIX + "attention_norm.weight"))).getFirst());
            Tensor q = keep(owned, keep(owned, torch.linear(h, w.get(PREFIX + "attention.wq.weight"))).view(batch, tokens, HEADS, headDim).transpose(1, 2));
            Tensor k = keep(owned, keep(owned, torch.linear(h, w.get(PREFIX + "attention.wk.weight"))).view(batch, tokens, KV_HEADS, headDim).transpose(1, 2));
            Tensor v = keep(owned, keep(owned, torch.linear(h, w.get(PREFIX + "attention.wv.weight"))).view(batch, tokens, KV_HEADS, headDim).transpose(1, 2));
            Tensor a = keep(owned, attention().call(List.of(q, k, v)).getFirst());
            Tensor merged = keep(owned, keep(owned, a.transpose(1, 2)).reshape(batch, tokens, HEADS * headDim));
            Tensor residual = keep(owned, x.add(keep(owned, torch.linear(merged, w.get(PREFIX + "attention.wo.weight")))));
            Tensor m = keep(owned, rmsNorm().call(List.of(residual, w.get(PREFIX + "ffn_norm.weight"))).getFirst());
            Tensor gate = keep(owned, torch.silu(keep(owned, torch.linear(m, w.get(PREFIX + "feed_forward.w1.weight")))));
            Tensor gated = keep(owned, gate.mul(keep(owned, torch.linear(m, w.get(PREFIX + "feed_forward.w3.weight")))));
            return residual.add(keep(owned, torch.linear(gated, w.get(PREFIX + "feed_forward.w2.weight"))));
        } finally {
            owned.forEach(Tensor::close);
        }
    }

    private static Tensor keep(List<Tensor> owned, Tensor t) {
        owned.add(t);
        return t;
    }

    /** rms_norm(input, [DIM], weight, eps). */
    private static AtenCall rmsNorm() {
        return AtenCall.of("rms_norm", "T,[i],T,f", null, List.of(DIM), null, EPS);
    }

    /** Causal grouped-query attention: scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True). */
    private static AtenCall attention() {
        return AtenCall.of("scaled_dot_product_attention", "T,T,T|is_causal=b|enable_gqa=b", null, null, null, true, true);
    }

    /** Layer 0's tensors of {@code file}, whole, on the host (the reference reads the same bytes). */
    private static Map<String, Tensor> layerOnHost(Path file) {
        Map<String, Tensor> all = SafeTensors.loadToHost(List.of(file));
        Map<String, Tensor> layer = new LinkedHashMap<>();
        all.forEach((name, t) -> {
            if (name.startsWith(PREFIX)) {
                layer.put(name, t);
            } else {
                t.close();
            }
        });
        return layer;
    }

    /** A random [rows, columns] weight scaled by 1 / sqrt(columns), as a linear layer's initialisation keeps outputs' scale. */
    private static Tensor projection(long rows, long columns) {
        try (Tensor r = torch.randn(rows, columns); Scalar scale = new Scalar(1 / Math.sqrt(columns))) {
            return r.mul(scale);
        }
    }

    /** 1 + 0.1 * randn: a norm's weight that is not all ones, so that a wrong weight shows. */
    private static Tensor normWeight() {
        try (Tensor r = torch.randn(DIM); Scalar tenth = new Scalar(0.1); Tensor small = r.mul(tenth); Scalar one = new Scalar(1.0)) {
            return small.add(one);
        }
    }

    /** Random weights of the tiny configuration's layer 0, seeded, under llama.py's names. */
    static void writeRandomLayer(Path file) {
        torch.manual_seed(0);
        long kv = KV_HEADS * (DIM / HEADS);
        Map<String, Tensor> w = new LinkedHashMap<>();
        w.put(PREFIX + "attention_norm.weight", normWeight());
        w.put(PREFIX + "attention.wq.weight", projection(DIM, DIM));
        w.put(PREFIX + "attention.wk.weight", projection(kv, DIM));
        w.put(PREFIX + "attention.wv.weight", projection(kv, DIM));
        w.put(PREFIX + "attention.wo.weight", projection(DIM, DIM));
        w.put(PREFIX + "ffn_norm.weight", normWeight());
        w.put(PREFIX + "feed_forward.w1.weight", projection(HIDDEN, DIM));
        w.put(PREFIX + "feed_forward.w2.weight", projection(DIM, HIDDEN));
        w.put(PREFIX + "feed_forward.w3.weight", projection(HIDDEN, DIM));
        try {
            SafeTensors.saveFromHost(file, w, Map.of("format", "pt"));
        } catch (UncheckedIOException e) {
            throw new UncheckedIOException("writing the example's weights to " + file, e.getCause());
        } finally {
            w.values().forEach(Tensor::close);
        }
    }
}
