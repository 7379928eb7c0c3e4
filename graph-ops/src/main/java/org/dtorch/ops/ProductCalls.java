package org.dtorch.ops;

import java.util.List;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;

/**
 * The calls behind the Java API's matrix products ({@link org.dtorch.api.DTensor#matmul},
 * {@link org.dtorch.api.DTorch#linear}): ATen's {@code matmul} and {@code linear} with every argument a tensor input,
 * run by {@link org.dtorch.api.DTorch#aten} under the {@link MatmulStrategy}. Made once, on first use (the dispatcher
 * must be loaded).
 *
 * <p>Immutable. Thread-safe.
 */
public final class ProductCalls {
    /** {@code aten::matmul(self, other)}. */
    public static final AtenCall MATMUL = tensors("matmul", 2);
    /** {@code aten::linear(input, weight)}, bias None. */
    public static final AtenCall LINEAR = new AtenCall(AtenOps.overload("linear", ""),
        List.of(new AtenCall.Input(0), new AtenCall.Input(1), new AtenCall.Default()));
    /** {@code aten::linear(input, weight, bias)}. */
    public static final AtenCall LINEAR_BIAS = tensors("linear", 3);

    private ProductCalls() {
    }

    private static AtenCall tensors(String name, int count) {
        List<AtenCall.Arg> args = new java.util.ArrayList<>();
        for (int i = 0; i < count; i++) {
            args.add(new AtenCall.Input(i));
        }
        return new AtenCall(AtenOps.overload(name, ""), args);
    }
}
