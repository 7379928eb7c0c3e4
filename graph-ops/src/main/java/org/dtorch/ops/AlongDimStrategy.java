package org.dtorch.ops;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.graph.DeviceKernel;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.ops.OptionSearch.Option;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.Overload;

/**
 * Operators that work along one dimension {@code dim} and treat every position of the other dimensions alone: the
 * cumulative {@code cumsum} and {@code cumprod}, and the derivatives autograd issues for strided slices
 * ({@code slice_backward}), {@code max(dim)}/{@code min(dim)} ({@code value_selecting_reduction_backward}) and
 * {@code index_select} ({@code index_select_backward}). Per mesh dimension:
 * <ul>
 *   <li>{@code S(k)} of a dimension other than {@code dim} stays (with index tensors {@code R}, and the indices of
 *       {@code value_selecting_reduction_backward} sharded like its gradient);</li>
 *   <li>{@code P(sum)} passes where the operator is linear in it (all but {@code cumprod}), indices {@code R};</li>
 *   <li>otherwise every input is {@code R}.</li>
 * </ul>
 * The derivatives carry the global sizes of their result ({@code input_sizes}, {@code self_sizes}, {@code sizes}); on
 * sharded inputs each device's call takes its own shard's sizes instead.
 *
 * <p>Stateless. Thread-safe.
 */
final class AlongDimStrategy implements ShardingStrategy {
    static final AlongDimStrategy INSTANCE = new AlongDimStrategy();

    /** The operators, by name, with the name of the parameter that holds their result's global sizes (none: ""). */
    private static final Map<String, String> SIZES = Map.of("cumsum", "", "cumprod", "", "slice_backward", "input_sizes",
        "index_select_backward", "self_sizes", "value_selecting_reduction_backward", "sizes");
    static final Set<String> NAMES = SIZES.keySet();

    private AlongDimStrategy() {
    }

    @Override
    public String family() {
        return "along-dim";
    }

    @Override
    public String legal() {
        return "per mesh dimension: R; S(k) for k other than dim (index tensors R, the indices of value_selecting_reduction_backward "
            + "sharded like the gradient); P(sum) with R indices, except for cumprod";
    }

    @Override
    public Decision decide(AtenCall call, List<TensorMeta> inputs, int outputs) {
        String name = call.overload().name();
        TensorMeta first = inputs.getFirst();
        int outNdim = outputNdim(call, first);
        int dim = Rules.normalizeDim(call.qualifiedName(), Math.toIntExact(((Number) call.constant("dim")).longValue()), Math.max(1, outNdim));
        boolean selecting = name.equals("value_selecting_reduction_backward");
        boolean keepdim = Boolean.TRUE.equals(call.constant("keepdim"));
        Placement r = Placement.replicate();
        List<List<Option>> options = new ArrayList<>();
        for (int m = 0; m < first.placements().size(); m++) {
            List<Option> here = new ArrayList<>();
            here.add(new Option(nCopies(inputs.size(), r), r));
            int ways = first.sharding().mesh().size(m);
            for (int k = 0; k < first.ndim(); k++) {
                // k: a dimension of the first input; out: the same dimension of the result.
                int out = selecting && !keepdim && k >= dim ? k + 1 : k;
                if (out == dim || selecting && keepdim && k == dim || first.size(k) < ways && !first.placement(m).isShard(k)) {
                    continue;
                }
                List<Placement> in = nCopies(inputs.size(), r);
                in.set(0, Placement.shard(k));
                if (selecting) {
                    in.set(1, Placement.shard(k));
                }
                here.add(new Option(in, Placement.shard(out)));
            }
            if (!name.equals("cumprod")) {
                List<Placement> in = nCopies(inputs.size(), r);
                in.set(0, Placement.partial());
                here.add(new Option(in, Placement.partial()));
            }
            options.add(here);
        }
        return OptionSearch.cheapest(call.qualifiedName(), inputs, options, outputs);
    }

    private static int outputNdim(AtenCall call, TensorMeta first) {
        String sizes = SIZES.get(call.overload().name());
        return sizes == null || sizes.isEmpty() ? first.ndim() : ((long[]) call.constant(sizes)).length;
    }

    private static List<Placement> nCopies(int n, Placement p) {
        return new ArrayList<>(java.util.Collections.nCopies(n, p));
    }

    /** Where the call carries global sizes and the result is sharded, the call with the device's own shard's sizes. */
    @Override
    public DeviceKernel kernel(AtenCall call, Operator op, long deviceId) {
        String param = SIZES.get(call.overload().name());
        TensorMeta out = op.outputs().getFirst().meta();
        if (param == null || param.isEmpty() || out.placements().stream().noneMatch(Placement::isShard)) {
            return null;
        }
        long[] local = out.layout().localShape(deviceId);
        if (Arrays.equals(local, out.shape())) {
            return null;
        }
        List<AtenCall.Arg> args = new ArrayList<>(call.args());
        List<Overload.Param> params = call.overload().params();
        for (int i = 0; i < params.size(); i++) {
            if (params.get(i).name().equals(param)) {
                args.set(i, new AtenCall.Constant(local));
            }
        }
        AtenCall own = new AtenCall(call.overload(), args);
        return (ctx, inputs) -> own.call(inputs);
    }
}
