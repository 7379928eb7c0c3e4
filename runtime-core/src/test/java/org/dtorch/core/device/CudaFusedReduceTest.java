package org.dtorch.core.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Test;

/**
 * The fused all-reduce kernel gives, bit for bit, what libtorch's binary ops give in rank order on the same GPU:
 * every supported element type and operation, the vector path and the element path (a range whose start is not
 * 16-byte aligned), and an odd element count.
 */
@GpuTest
class CudaFusedReduceTest {
    private static final Device GPU = Device.cuda(0);
    private static final long NUMEL = (1L << 20) + 3;
    private static final int RANKS = 3;

    @Test
    void shouldEqualLibtorchsBinaryOpsInRankOrder() {
        DeviceStream stream = DeviceStream.of(GPU);
        List<String> wrong = new ArrayList<>();
        for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.Double, ScalarType.Half, ScalarType.BFloat16, ScalarType.Int,
            ScalarType.Long)) {
            List<Tensor> ins = inputs(dtype);
            for (CudaFusedReduce.Combine combine : CudaFusedReduce.Combine.values()) {
                for (boolean average : new boolean[] {false, true}) {
                    if (!CudaFusedReduce.supports(dtype, combine, average) || (average && combine != CudaFusedReduce.Combine.SUM)) {
                        continue;
                    }
                    for (long start : new long[] {0, 1}) {
                        long count = NUMEL - start - 1;
                        Tensor[] outs = new Tensor[RANKS];
                        for (int k = 0; k < RANKS; k++) {
                            outs[k] = torch.zeros_like(ins.get(k));
                        }
                        CudaFusedReduce.allReduceRange(ins.toArray(Tensor[]::new), outs, start, count, combine, average, stream);
                        try (Tensor expected = reference(ins, combine, average)) {
                            for (int k = 0; k < RANKS; k++) {
                                try (Tensor got = outs[k].narrow(0, start, count); Tensor want = expected.narrow(0, start, count);
                                     Tensor before = outs[k].narrow(0, 0, start); Tensor after = outs[k].narrow(0, start + count, 1)) {
                                    if (!torch.equal(got, want)) {
                                        wrong.add(TorchTensors.dtypeName(dtype) + " " + combine + (average ? " avg" : "") + " start " + start
                                            + " output " + k);
                                    }
                                    if (before.count_nonzero().item_long() != 0 || after.count_nonzero().item_long() != 0) {
                                        wrong.add(TorchTensors.dtypeName(dtype) + " " + combine + " wrote outside its range");
                                    }
                                }
                                outs[k].close();
                            }
                        }
                    }
                }
            }
            ins.forEach(Tensor::close);
        }
        assertEquals(List.of(), wrong);
    }

    @Test
    void shouldPropagateNaNAsTorchMaximumDoes() {
        DeviceStream stream = DeviceStream.of(GPU);
        {
            Tensor a = TorchTensors.to(torch.tensor(new float[] {1f, Float.NaN, 3f, -0f}), GPU);
            Tensor b = TorchTensors.to(torch.tensor(new float[] {Float.NaN, 2f, 1f, 0f}), GPU);
            Tensor out = torch.zeros_like(a);
            CudaFusedReduce.allReduceRange(new Tensor[] {a, b}, new Tensor[] {out, out}, 0, 4, CudaFusedReduce.Combine.MAX, false, stream);
            try (Tensor expected = torch.maximum(a, b)) {
                assertTrue(torch.equal(torch.isnan(out), torch.isnan(expected)), TorchTensors.describe(out));
                assertEquals(3f, out.narrow(0, 2, 1).item_float());
            }
        }
    }

    @Test
    void shouldRefuseTensorsItCannotReadBeforeLaunching() {
        DeviceStream stream = DeviceStream.of(GPU);
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU)) {
            Tensor gpu = torch.ones(new long[] {8}, options);
            Tensor host = torch.ones(8);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CudaFusedReduce.allReduceRange(
                new Tensor[] {gpu, host}, new Tensor[] {gpu, gpu}, 0, 8, CudaFusedReduce.Combine.SUM, false, stream));
            assertTrue(e.getMessage().contains("input 1 is not on cuda:0"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> CudaFusedReduce.allReduceRange(
                new Tensor[] {gpu}, new Tensor[] {gpu}, 4, 8, CudaFusedReduce.Combine.SUM, false, stream));
            assertTrue(e.getMessage().contains("at least 12 elements"), e.getMessage());
        }
    }

    /** Three tensors of varied values: small integers for integer types, signed fractions for floating ones. */
    private static List<Tensor> inputs(ScalarType dtype) {
        List<Tensor> ins = new ArrayList<>();
        for (int k = 0; k < RANKS; k++) {
            try (Tensor ramp = torch.arange(new Scalar(NUMEL)); Scalar shift = new Scalar(k * 7L); Scalar mod = new Scalar(13L);
                 Scalar center = new Scalar(6L)) {
                Tensor values = ramp.add(shift).remainder(mod).sub(center);
                try (Tensor typed = values.to(dtype)) {
                    Tensor onGpu = TorchTensors.to(typed, GPU);
                    if (dtype != ScalarType.Int && dtype != ScalarType.Long) {
                        try (Scalar scale = new Scalar(0.37 + k)) {
                            onGpu.mul_(scale);
                        }
                    }
                    ins.add(onGpu);
                }
                values.close();
            }
        }
        return ins;
    }

    /** What SameDeviceBackend's libtorch path computes: op(in0, in1), then op with each further input, then the average. */
    private static Tensor reference(List<Tensor> ins, CudaFusedReduce.Combine combine, boolean average) {
        Tensor acc = switch (combine) {
            case SUM -> torch.add(ins.get(0), ins.get(1));
            case PRODUCT -> torch.mul(ins.get(0), ins.get(1));
            case MAX -> torch.maximum(ins.get(0), ins.get(1));
            case MIN -> torch.minimum(ins.get(0), ins.get(1));
        };
        for (int k = 2; k < ins.size(); k++) {
            switch (combine) {
                case SUM -> acc.add_(ins.get(k));
                case PRODUCT -> acc.mul_(ins.get(k));
                case MAX -> torch.maximum_out(acc, acc, ins.get(k)).close();
                case MIN -> torch.minimum_out(acc, acc, ins.get(k)).close();
            }
        }
        if (average) {
            try (Scalar n = new Scalar((double) ins.size())) {
                acc.div_(n);
            }
        }
        return acc;
    }
}
