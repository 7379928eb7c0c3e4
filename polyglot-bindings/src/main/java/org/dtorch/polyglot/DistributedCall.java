package org.dtorch.polyglot;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.ops.aten.ArgKind;
import org.dtorch.ops.aten.ArgSource;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.CallPlan;
import org.dtorch.ops.aten.Overload;
import org.dtorch.polyglot.torch.Dtypes;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * One ATen overload on distributed tensors with a fixed way of taking a call's arguments: what {@link PyBridge#aten}
 * resolves from an operator's name and a signature key ({@link ArgKind}), kept so that a repeated call from Python skips
 * the operator's lookup and the overload's resolution, and takes its values as arguments rather than as one list.
 * The parameters' sources and the shape of the returns are read once here, not per call.
 *
 * <p>Not thread-safe: the Python client thread that owns the runtime (as every operator it issues); the plan is
 * immutable.
 */
public final class DistributedCall {
    private final DTorch runtime;
    private final String name;
    private final CallPlan plan;
    private final Overload.Param[] params;
    private final ArgSource[] sources;
    private final String[] returnNames;
    private final boolean[] returnIsList;
    private final boolean oneTensor;
    /** Each value's kind in the key the call was bound for, positionals then keywords ({@link ArgKind}). */
    private final String[] valueKinds;

    DistributedCall(DTorch runtime, String name, CallPlan plan, ArgKind.Signature signature) {
        this.runtime = runtime;
        this.name = name;
        this.plan = plan;
        List<String> kinds = new ArrayList<>(signature.positional());
        kinds.addAll(signature.keywordKinds());
        this.valueKinds = kinds.toArray(String[]::new);
        this.params = plan.overload().params().toArray(Overload.Param[]::new);
        this.sources = plan.sources().clone();
        this.returnNames = plan.overload().returnNames().toArray(String[]::new);
        List<String> types = plan.overload().returnTypes();
        this.returnIsList = new boolean[types.size()];
        for (int r = 0; r < returnIsList.length; r++) {
            returnIsList[r] = types.get(r).equals(ArgKind.TENSOR_LIST);
        }
        this.oneTensor = types.size() == 1 && types.get(0).equals(ArgKind.TENSOR);
    }

    /** True when the overload returns one tensor, which the {@code call} methods then return as it is. */
    @HostAccess.Export
    public boolean returnsOneTensor() {
        return oneTensor;
    }

    /** {@link #callList} with one value. */
    @HostAccess.Export
    public Object call1(Value first) {
        return run(new Value[] {first});
    }

    /** {@link #callList} with two values. */
    @HostAccess.Export
    public Object call2(Value first, Value second) {
        return run(new Value[] {first, second});
    }

    /** {@link #callList} with three values. */
    @HostAccess.Export
    public Object call3(Value first, Value second, Value third) {
        return run(new Value[] {first, second, third});
    }

    /** {@link #callList} with four values (a slice's or a narrow's arguments, without a list to take apart). */
    @HostAccess.Export
    public Object call4(Value first, Value second, Value third, Value fourth) {
        return run(new Value[] {first, second, third, fourth});
    }

    /** {@link #callList} with five values. */
    @HostAccess.Export
    public Object call5(Value first, Value second, Value third, Value fourth, Value fifth) {
        return run(new Value[] {first, second, third, fourth, fifth});
    }

    /**
     * Runs the overload on the call's values (positionals then keyword values, in the key's order), as
     * {@link PyBridge#aten} does.
     *
     * @return the one {@link DTensor} when {@link #returnsOneTensor()}, else {@link PyBridge#aten}'s array: the returns'
     *         names followed by one {@link DTensor} (or {@code DTensor[]} for a {@code Tensor[]} return) per return
     */
    @HostAccess.Export
    public Object callList(Value values) {
        Value[] array = new Value[Math.toIntExact(values.getArraySize())];
        for (int i = 0; i < array.length; i++) {
            array[i] = values.getArrayElement(i);
        }
        return run(array);
    }

    /** {@link #callList} for values already taken apart; always the array form of the returns. */
    Object[] runArray(Value[] values) {
        return arrayOf(outputs(values));
    }

    private Object run(Value[] values) {
        List<DTensor> outputs = outputs(values);
        return oneTensor ? outputs.getFirst() : arrayOf(outputs);
    }

    private List<DTensor> outputs(Value[] values) {
        Object[] plain = new Object[values.length];
        for (int i = 0; i < values.length; i++) {
            plain[i] = plainValue(i, values[i]);
        }
        List<DTensor> tensors = new ArrayList<>(4);
        for (int i = 0; i < params.length; i++) {
            ArgSource source = sources[i];
            String kind = source.kind();
            if (kind.equals(ArgKind.TENSOR)) {
                tensors.add(BridgeArguments.distributed(name, params[i], values[source.index()]));
            } else if (kind.equals(ArgKind.TENSOR_LIST)) {
                Value list = values[source.index()];
                for (long k = 0; k < list.getArraySize(); k++) {
                    tensors.add(BridgeArguments.distributed(name, params[i], list.getArrayElement(k)));
                }
            } else if (!source.isDefault() && !source.isPacked() && kind.equals(ArgKind.DTYPE)) {
                plain[source.index()] = Dtypes.scalarType((String) plain[source.index()]);
            } else if (!source.isDefault() && !source.isPacked() && kind.equals(ArgKind.MEMORY_FORMAT)) {
                plain[source.index()] = ArgKind.memoryFormat((String) plain[source.index()]);
            }
        }
        return runtime.aten(AtenCall.of(plan, plain), tensors.toArray(DTensor[]::new));
    }

    /**
     * Value {@code i} as a plain Java value (null for a tensor, which the parameters take below), read as the kind its key
     * gave it: the caller built the key from the values' types, so an int is read as a long without asking Python what it
     * is. Other kinds take {@link BridgeArguments#plainValue}.
     */
    private Object plainValue(int i, Value v) {
        String kind = i < valueKinds.length ? valueKinds[i] : "";
        switch (kind) {
            case ArgKind.INT:
                return v.asLong();
            case ArgKind.FLOAT:
                return v.asDouble();
            case ArgKind.BOOL:
                return v.asBoolean();
            case ArgKind.NONE:
                return null;
            case "[" + ArgKind.INT + "]":
                int n = Math.toIntExact(v.getArraySize());
                List<Object> longs = new ArrayList<>(n);
                for (int k = 0; k < n; k++) {
                    longs.add(v.getArrayElement(k).asLong());
                }
                return longs;
            default:
                return v.isHostObject() && v.asHostObject() instanceof DTensor ? null : BridgeArguments.plainValue(v);
        }
    }

    private Object[] arrayOf(List<DTensor> outputs) {
        Object[] out = new Object[returnIsList.length + 1];
        out[0] = returnNames.clone();
        int listLength = outputs.size() - (returnIsList.length - 1); // at most one Tensor[] return: it takes what the others leave
        for (int r = 0, next = 0; r < returnIsList.length; r++) {
            if (returnIsList[r]) {
                out[r + 1] = outputs.subList(next, next + listLength).toArray(DTensor[]::new);
                next += listLength;
            } else {
                out[r + 1] = outputs.get(next++);
            }
        }
        return out;
    }
}
