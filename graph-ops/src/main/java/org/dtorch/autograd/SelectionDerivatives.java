package org.dtorch.autograd;

import static org.dtorch.autograd.Grads.aten;
import static org.dtorch.autograd.Grads.list;
import static org.dtorch.autograd.Grads.v;

import java.util.Arrays;
import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;

/**
 * The derivatives of operators that select or accumulate along dimensions: {@code max}, {@code min}, {@code amax},
 * {@code amin}, {@code cumsum}, {@code prod}, {@code index_select} and {@code flip} (its own inverse).
 *
 * <p>A reduction to the largest (smallest) value gives its gradient to the elements equal to the result, split evenly
 * among them, as libtorch does for {@code amax}/{@code amin} and for {@code max()}/{@code min()} of a whole tensor;
 * that composition is element-wise and a sum, so it keeps the input's shards. {@code max(dim)} and {@code min(dim)}
 * give it to the element their index names, as libtorch does, through ATen's {@code value_selecting_reduction_backward};
 * {@code index_select} through {@code index_select_backward}. Those two take the global sizes, which a shard's call
 * cannot use, so they run on replicated inputs (the fallback strategy). {@code cumsum}'s gradient is the cumulative sum
 * from the other end.
 *
 * <p>Thread-safe: stateless.
 */
final class SelectionDerivatives {
    private SelectionDerivatives() {
    }

    /** The derivative of {@code call}, or null when this class has none for it. */
    static Derivative of(AtenCall call) {
        String name = call.overload().name();
        if (call.inputCount() != 1 && !name.equals("index_select")) {
            return null;
        }
        return switch (name) {
            case "amax", "amin" -> extremum((long[]) call.constant("dim"), Boolean.TRUE.equals(call.constant("keepdim")));
            case "max", "min" -> switch (call.overload().overloadName()) {
                case "" -> extremum(new long[0], false);
                case "dim" -> byIndex((Long) call.constant("dim"), Boolean.TRUE.equals(call.constant("keepdim")));
                default -> null;
            };
            case "cumsum" -> cumsum((Long) call.constant("dim"));
            case "flip" -> call.constant("dims") instanceof long[] dims
                ? (in, out, g, n) -> new DTensor[] {aten("flip", "T,[i]", v(null, list(dims)), g[0])} : null;
            case "prod" -> call.hasParam("dim") ? prod((Long) call.constant("dim"), Boolean.TRUE.equals(call.constant("keepdim"))) : prod(null, false);
            case "index_select" -> call.hasParam("index") && call.constant("dim") instanceof Long dim ? indexSelect(dim) : null;
            default -> null;
        };
    }

    /**
     * The gradient of a reduction to the largest or smallest values over {@code dims} (none: all): {@code g} to every
     * element equal to its result, divided by how many are.
     */
    static Derivative extremum(long[] dims, boolean keepdim) {
        int[] given = Arrays.stream(dims).mapToInt(d -> (int) d).toArray();
        return (in, out, g, n) -> {
            DTensor x = in[0];
            int[] reduced = Grads.normalize(given, x.ndim());
            DTensor chosen = x.eq(kept(out[0], reduced, keepdim)).to(x.dtype());
            DTensor count = chosen.sum(reduced, true);
            return new DTensor[] {chosen.mul(kept(g[0], reduced, keepdim).div(count))};
        };
    }

    /** {@code t}, a reduction over {@code dims}, with those dimensions back as ones (they broadcast against the input). */
    private static DTensor kept(DTensor t, int[] dims, boolean keepdim) {
        DTensor r = t;
        if (!keepdim) {
            for (int d : dims) {
                r = aten("unsqueeze", "T,i", v(null, (long) d), r);
            }
        }
        return r;
    }

    /** {@code max(dim)}/{@code min(dim)}: the gradient of the values to the elements the indices (the second output) name. */
    private static Derivative byIndex(long dimGiven, boolean keepdim) {
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            long dim = dimGiven < 0 ? dimGiven + Math.max(1, shape.length) : dimGiven;
            return new DTensor[] {aten("value_selecting_reduction_backward", "T,i,T,[i],b", v(null, dim, null, list(shape), keepdim),
                g[0], out[1])};
        };
    }

    private static Derivative cumsum(long dimGiven) {
        return (in, out, g, n) -> {
            long dim = dimGiven < 0 ? dimGiven + Math.max(1, in[0].ndim()) : dimGiven;
            if (in[0].ndim() == 0) {
                return new DTensor[] {g[0].to(in[0].dtype())};
            }
            DTensor reversed = aten("flip", "T,[i]", v(null, list(dim)), g[0]);
            DTensor summed = aten("flip", "T,[i]", v(null, list(dim)), aten("cumsum", "T,i", v(null, dim), reversed));
            return new DTensor[] {summed.dtype() == in[0].dtype() ? summed : summed.to(in[0].dtype())};
        };
    }

    /**
     * {@code prod} over {@code dim} (null: the whole tensor, as one flat dimension): each element's gradient is {@code g}
     * times the product of the others, the product of the elements before it times the product of those after it
     * (exclusive cumulative products from both ends), which holds with zeros among them as dividing the result would not.
     */
    private static Derivative prod(Long dimGiven, boolean keepdim) {
        return (in, out, g, n) -> {
            DTensor x = in[0];
            long[] shape = x.shape();
            if (dimGiven == null || x.ndim() == 0) {
                DTensor flat = x.reshape(-1);
                DTensor others = productOfOthers(flat, 0);
                return new DTensor[] {others.mul(g[0].to(x.dtype())).reshape(shape)};
            }
            int dim = (int) (dimGiven < 0 ? dimGiven + x.ndim() : dimGiven);
            DTensor gx = kept(g[0], new int[] {dim}, keepdim);
            return new DTensor[] {productOfOthers(x, dim).mul(gx.dtype() == x.dtype() ? gx : gx.to(x.dtype()))};
        };
    }

    /** For each element of {@code x}, the product of the other elements along {@code dim}. */
    private static DTensor productOfOthers(DTensor x, int dim) {
        if (x.size(dim) <= 1) {
            return replicatedOnes(x, x.shape());
        }
        DTensor before = exclusiveCumprod(x, dim);
        DTensor flipped = aten("flip", "T,[i]", v(null, list(dim)), x);
        DTensor after = aten("flip", "T,[i]", v(null, list(dim)), exclusiveCumprod(flipped, dim));
        return before.mul(after);
    }

    /** The product of the elements before each one along {@code dim} (one for the first). */
    private static DTensor exclusiveCumprod(DTensor x, int dim) {
        long[] oneShape = x.shape();
        oneShape[dim] = 1;
        DTensor shifted = x.runtime().cat(List.of(replicatedOnes(x, oneShape), x.narrow(dim, 0, x.size(dim) - 1)), dim);
        return aten("cumprod", "T,i", v(null, (long) dim), shifted);
    }

    private static DTensor replicatedOnes(DTensor like, long[] shape) {
        Placement[] replicated = new Placement[like.mesh().ndim()];
        Arrays.fill(replicated, Placement.replicate());
        return like.runtime().ones(shape, like.dtype(), like.mesh(), replicated);
    }

    private static Derivative indexSelect(long dimGiven) {
        return (in, out, g, n) -> {
            long[] shape = in[0].shape();
            long dim = dimGiven < 0 ? dimGiven + Math.max(1, shape.length) : dimGiven;
            return new DTensor[] {aten("index_select_backward", "T,[i],i,T", v(null, list(shape), dim, null), g[0], in[1]), null};
        };
    }
}
