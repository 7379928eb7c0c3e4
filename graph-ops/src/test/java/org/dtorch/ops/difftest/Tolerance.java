package org.dtorch.ops.difftest;

import java.util.Arrays;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.tensor.TorchTensors;

/**
 * How close a value of the runtime must be to libtorch's on one device. Integers and bools must be equal. Floating-point
 * values must be non-finite exactly where libtorch's are (an infinity may be NaN, since a partial sum of infinities of
 * both signs is NaN where the whole is one infinity, but never the other infinity), and elsewhere {@code |got - want| <= atol * scale + rtol *
 * |want|}, where {@code scale} is the largest finite {@code |want|} of the tensor (at least 1): a distributed operator
 * sums in another order, so its rounding error is relative to the magnitudes summed, not to the element's own.
 *
 * <table>
 *   <caption>Tolerances per dtype</caption>
 *   <tr><th>dtype</th><th>rtol</th><th>atol</th></tr>
 *   <tr><td>float32</td><td>1e-4</td><td>1e-4</td></tr>
 *   <tr><td>bfloat16</td><td>2e-2</td><td>6e-2</td></tr>
 *   <tr><td>float16</td><td>2e-3</td><td>2e-3</td></tr>
 *   <tr><td>float64</td><td>1e-4</td><td>1e-4</td></tr>
 *   <tr><td>int64, bool</td><td>exact</td><td>exact</td></tr>
 * </table>
 *
 * <p>bfloat16's absolute tolerance allows for partial sums: each device rounds its partial sum to 8 bits (a relative
 * error of 2^-8 of the partial, which may be larger than the whole when the partials cancel), and four partials of up
 * to four times the result's scale add up to about 6e-2 of it, where one device rounds the whole sum once.
 *
 * <p>A floating-point value computed from values of a looser dtype gets that dtype's tolerance (a bfloat16 product cast
 * to float32 keeps bfloat16's rounding). float64 values of these programs come from casts of float32 ones (libtorch's vectorized and scalar loops round a
 * float32 operator's last bit differently on differently sized shards), so they get float32's tolerance.
 *
 * <p>Integers and bools are held exactly also where they come from floating values (a comparison, a cast): the
 * generator draws such discontinuous operators only on exact values, whose bits are the same on every device and in
 * every order ({@link ProgramGenerator}), so any difference there is the runtime's.
 *
 * <p>Stateless. Thread-safe.
 */
public final class Tolerance {
    private Tolerance() {
    }

    /** The relative and absolute tolerance of {@code dtype}; zero for exact dtypes. */
    public static double[] of(ScalarType dtype) {
        return switch (dtype) {
            case Float -> new double[] {1e-4, 1e-4};
            case BFloat16 -> new double[] {2e-2, 6e-2};
            case Half -> new double[] {2e-3, 2e-3};
            case Double -> new double[] {1e-4, 1e-4};
            default -> new double[] {0, 0};
        };
    }

    /** Null when {@code got} matches {@code want} (shape, dtype and values), else what differs. */
    public static String compare(Tensor want, Tensor got) {
        return compare(want, got, TorchTensors.dtype(want));
    }

    /**
     * The floating dtype of the two whose tolerance is the looser (a value cast up from bfloat16 keeps bfloat16's
     * rounding); integer and bool dtypes give way to any floating one.
     */
    public static ScalarType looser(ScalarType a, ScalarType b) {
        if (!torch.isFloatingType(a)) {
            return b;
        }
        if (!torch.isFloatingType(b)) {
            return a;
        }
        return of(a)[0] >= of(b)[0] ? a : b;
    }

    /**
     * As {@link #compare(Tensor, Tensor)}, a floating-point value held to the tolerance of {@code precision}: the loosest
     * floating dtype among the values it was computed from.
     */
    public static String compare(Tensor want, Tensor got, ScalarType precision) {
        if (!Arrays.equals(TorchTensors.shape(want), TorchTensors.shape(got)) || TorchTensors.dtype(want) != TorchTensors.dtype(got)) {
            return "got " + TorchTensors.describe(got) + ", torch gives " + TorchTensors.describe(want);
        }
        ScalarType dtype = TorchTensors.dtype(want);
        if (!torch.isFloatingType(dtype)) {
            return torch.equal(want, got) ? null : "values " + TorchTensors.format(got, 16) + ", torch gives " + TorchTensors.format(want, 16);
        }
        double[] tol = of(looser(dtype, precision));
        try (Tensor w = want.to(ScalarType.Double); Tensor g = got.to(ScalarType.Double)) {
            double scale = 1;
            try (Tensor finite = torch.isfinite(w); Scalar zero = new Scalar(0.0); Tensor absW = w.abs(); Tensor masked = absW.where(finite, zero);
                 Tensor max = masked.numel() == 0 ? null : masked.max()) {
                if (max != null) {
                    scale = Math.max(1, max.item_double());
                }
            }
            try (Tensor infW = torch.isinf(w); Tensor infG = torch.isinf(g);
                 Tensor finW = torch.isfinite(w); Tensor finG = torch.isfinite(g)) {
                // Where torch's value is not finite the runtime's must not be either; an infinity may come out as NaN
                // (a partial sum of +inf and -inf parts, where the whole is one infinity), but not as the other one.
                boolean same = torch.equal(finW, finG);
                if (same) {
                    try (Tensor both = infW.logical_and(infG); Tensor wInf = w.masked_select(both); Tensor gInf = g.masked_select(both);
                         Tensor wf = w.masked_select(finW);
                         Tensor gf = g.masked_select(finG); Tensor delta = wf.sub(gf); Tensor diff = delta.abs(); Tensor absF = wf.abs();
                         Scalar r = new Scalar(tol[0]); Tensor bound = absF.mul(r);
                         Scalar a = new Scalar(tol[1] * scale); Tensor limit = bound.add(a); Tensor ok = diff.le(limit); Tensor all = ok.all()) {
                        same = torch.equal(wInf, gInf) && all.item_bool();
                    }
                }
                if (same) {
                    return null;
                }
            }
        }
        return "values " + TorchTensors.format(got, 16) + ", torch gives " + TorchTensors.format(want, 16) + " (" + TorchTensors.dtypeName(dtype)
            + ": rtol " + tol[0] + ", atol " + tol[1] + " x " + "the largest |value|)";
    }
}
