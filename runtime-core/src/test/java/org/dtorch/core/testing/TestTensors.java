package org.dtorch.core.testing;

import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/** Small deterministic tensors whose values stay exact in every tested dtype (bfloat16 included). */
public final class TestTensors {

    private TestTensors() {
    }

    /** {@code (arange(numel) + shift) % modulus + offset}, reshaped and cast to {@code dtype}. */
    public static Tensor pattern(long[] shape, ScalarType dtype, long shift, long modulus, long offset) {
        long numel = 1;
        for (long s : shape) {
            numel *= s;
        }
        try (TensorOptions longs = new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Long));
             Tensor base = torch.arange(new Scalar(numel), longs);
             Tensor shifted = base.add(new Scalar(shift));
             Tensor wrapped = shifted.remainder(new Scalar(modulus));
             Tensor lifted = wrapped.add(new Scalar(offset));
             Tensor shaped = lifted.reshape(shape)) {
            return shaped.to(dtype);
        }
    }

    /** A float32 tensor of the given shape filled with {@code value}. */
    public static Tensor full(float value, long... shape) {
        return torch.full(shape, new Scalar(value));
    }

    /** True when both tensors have the same shape, dtype and values. */
    public static boolean same(Tensor a, Tensor b) {
        return TorchTensors.dtype(a) == TorchTensors.dtype(b) && java.util.Arrays.equals(TorchTensors.shape(a), TorchTensors.shape(b)) && a.equal(b);
    }

    /** A message showing both tensors. */
    public static String diff(Tensor expected, Tensor actual) {
        return "expected " + TorchTensors.describe(expected) + " " + values(expected) + "\nbut got  "
            + TorchTensors.describe(actual) + " " + values(actual);
    }

    /** The first values of a tensor, as doubles, for messages. */
    public static String values(Tensor t) {
        try (Tensor d = t.to(ScalarType.Double).contiguous()) {
            int n = (int) Math.min(d.numel(), 64);
            double[] out = new double[n];
            if (n > 0) {
                new org.bytedeco.javacpp.DoublePointer(d.data_ptr()).capacity(n).get(out);
            }
            return java.util.Arrays.toString(out) + (d.numel() > n ? "..." : "");
        }
    }
}
