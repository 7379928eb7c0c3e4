package org.dtorch.api;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.dtorch.ops.CopySpec;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;
import org.dtorch.ops.aten.Overload;

/**
 * ATen's {@code out=} overloads on distributed tensors ({@code torch.add(a, b, out=c)}): the functional overload of the
 * same other parameters runs, and each result is copied into its {@code out} tensor, which keeps its placements (the
 * result is moved to them on the way) and is returned. An {@code out} tensor of another shape is refused: a distributed
 * tensor is not resized.
 *
 * <p>Not thread-safe: the client thread that owns the runtime.
 */
final class OutVariants {

    private OutVariants() {
    }

    static List<DTensor> run(DTorch runtime, AtenCall call, DTensor... inputs) {
        Objects.requireNonNull(inputs, () -> call.qualifiedName() + ": inputs is null");
        Overload o = call.overload();
        List<String> written = o.mutatedParams();
        List<Overload.Param> params = o.params();
        List<AtenCall.Arg> args = new ArrayList<>();
        List<DTensor> kept = new ArrayList<>();
        List<DTensor> outs = new ArrayList<>();
        List<Overload.Param> functionalParams = new ArrayList<>();
        for (int i = 0; i < params.size(); i++) {
            AtenCall.Arg a = call.args().get(i);
            boolean out = written.contains(params.get(i).name());
            if (out) {
                if (!(a instanceof AtenCall.Input in)) {
                    throw new IllegalArgumentException(call.qualifiedName() + ": the out argument '" + params.get(i).name() + "' must be one "
                        + "distributed tensor");
                }
                outs.add(Objects.requireNonNull(inputs[in.index()], () -> call.qualifiedName() + ": out is null"));
                continue;
            }
            functionalParams.add(params.get(i));
            if (a instanceof AtenCall.Input in) {
                args.add(new AtenCall.Input(kept.size()));
                kept.add(inputs[in.index()]);
            } else if (a instanceof AtenCall.InputList in) {
                args.add(new AtenCall.InputList(kept.size(), in.count()));
                kept.addAll(Arrays.asList(inputs).subList(in.first(), in.first() + in.count()));
            } else {
                args.add(a);
            }
        }
        Overload functional = twin(call, functionalParams);
        List<DTensor> results = runtime.aten(new AtenCall(functional, args), kept.toArray(DTensor[]::new));
        try {
            if (results.size() != outs.size()) {
                throw new UnsupportedOperationException(call.qualifiedName() + " writes " + outs.size() + " tensors but its functional form "
                    + functional.name() + " returns " + results.size());
            }
            for (int k = 0; k < outs.size(); k++) {
                DTensor out = outs.get(k);
                DTensor result = results.get(k);
                if (!Arrays.equals(out.shape(), result.shape())) {
                    throw new IllegalArgumentException(call.qualifiedName() + ": out " + out + " has shape " + Arrays.toString(out.shape())
                        + " but the result has shape " + Arrays.toString(result.shape()) + "; a distributed tensor is not resized, so "
                        + "give an out of the result's shape");
                }
                runtime.write(CopySpec.INSTANCE, out, result);
            }
        } finally {
            results.forEach(DTensor::close);
        }
        return outs;
    }

    /** The overload of the same name that writes nothing and takes {@code params}. */
    private static Overload twin(AtenCall call, List<Overload.Param> params) {
        List<Overload> candidates = AtenOps.overloads(call.overload().name());
        for (Overload c : candidates) {
            if (c.mutatedParams().isEmpty() && same(c.params(), params)) {
                return c;
            }
        }
        throw new UnsupportedOperationException(call.qualifiedName() + " has no functional overload of the same other parameters; "
            + "call the functional form and copy_ the result");
    }

    private static boolean same(List<Overload.Param> a, List<Overload.Param> b) {
        if (a.size() != b.size()) {
            return false;
        }
        for (int i = 0; i < a.size(); i++) {
            if (!a.get(i).name().equals(b.get(i).name()) || !a.get(i).type().equals(b.get(i).type())) {
                return false;
            }
        }
        return true;
    }
}
