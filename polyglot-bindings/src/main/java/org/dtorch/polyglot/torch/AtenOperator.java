package org.dtorch.polyglot.torch;

import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.ops.aten.ArgKind;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.CallPlan;
import org.dtorch.ops.aten.Overload;
import org.graalvm.polyglot.HostAccess;

/**
 * Every overload of one ATen operator name ({@code aten::add}: {@code Tensor}, {@code Scalar}, {@code out}, ...) and
 * the calls already resolved for it. {@link #resolve(String)} takes the overload a signature key fits at the lowest
 * conversion cost, as PyTorch's Python argument parser picks one ({@link AtenCall#bestPlan}, which chooses each plan
 * once), and keeps its {@link BoundCall}, so the next call with the same kinds of arguments costs one map lookup (the
 * Python side keeps it too).
 *
 * <p>Thread-safe: the overloads are immutable and the cache is concurrent (two threads may resolve the same key at
 * once; either result is the same plan).
 */
public final class AtenOperator {
    private final String name;
    private final List<Overload> overloads;
    private final ConcurrentHashMap<String, BoundCall> resolved = new ConcurrentHashMap<>();

    AtenOperator(String name, List<Overload> overloads) {
        this.name = name;
        this.overloads = overloads; // sorted by AtenOps: the default overload first, then by name
    }

    /** The operator's name without the namespace: {@code add}. */
    @HostAccess.Export
    public String name() {
        return name;
    }

    /** Every schema of the operator, one per overload. */
    @HostAccess.Export
    public String[] schemas() {
        return overloads.stream().map(Overload::signature).toArray(String[]::new);
    }

    /**
     * The call for arguments of the kinds {@code key} spells ({@link ArgKind}).
     *
     * @throws ArgumentMismatchException when no overload takes them, naming every schema tried (Python raises
     *                                   {@code TypeError})
     */
    @HostAccess.Export
    public BoundCall resolve(String key) {
        BoundCall call = resolved.get(key);
        if (call != null) {
            return call;
        }
        CallPlan best = AtenCall.bestPlan(name, key);
        if (best == null) {
            throw new ArgumentMismatchException(name + "() received an invalid combination of arguments: got "
                + ArgKind.Signature.parse(key).describe() + ", but no overload takes them; tried:\n  " + String.join("\n  ", schemas()));
        }
        call = new BoundCall(best);
        BoundCall raced = resolved.putIfAbsent(key, call);
        return raced == null ? call : raced;
    }

    @Override
    public String toString() {
        return "aten::" + name + " (" + overloads.size() + " overloads)";
    }
}
