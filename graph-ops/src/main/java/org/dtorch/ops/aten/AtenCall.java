package org.dtorch.ops.aten;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import org.bytedeco.pytorch.GenericList;
import org.bytedeco.pytorch.IValue;
import org.bytedeco.pytorch.IValueVector;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch.MemoryFormat;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * One overload of an ATen operator with its arguments fixed, except the tensors: for each schema parameter, in schema
 * order, either the index of a tensor input, a run of tensor inputs for a {@code Tensor[]} parameter, a constant (a
 * number, a bool, a string, a dtype, a memory format, a list of numbers, or None) or the schema's default. {@link #call}
 * runs it through the dispatcher ({@code OperatorHandle.callBoxed}) on given tensors: the local shards on a device, meta
 * tensors for inference.
 *
 * <p>Constants are plain Java values, so a call is an immutable value that any thread may run; each {@link #call}
 * makes the constants' {@code IValue}s it needs and closes them before returning. Thread-safe.
 */
public final class AtenCall {
    /** One schema parameter's value. */
    public sealed interface Arg permits Input, InputList, Constant, Default {
    }

    /** The {@code index}-th tensor input. */
    public record Input(int index) implements Arg {
    }

    /** A {@code Tensor[]} parameter: the {@code count} tensor inputs from the {@code first}-th on, in order. */
    public record InputList(int first, int count) implements Arg {
    }

    /**
     * A constant: null (None), {@code Long}, {@code Double}, {@code Boolean}, {@code String}, {@code ScalarType},
     * {@code MemoryFormat}, {@code long[]}, {@code double[]} or {@code boolean[]}.
     */
    public record Constant(Object value) implements Arg {
        @Override
        public String toString() {
            return value instanceof long[] l ? Arrays.toString(l) : value instanceof double[] d ? Arrays.toString(d)
                : value instanceof boolean[] b ? Arrays.toString(b) : String.valueOf(value);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Constant c && Objects.deepEquals(value, c.value);
        }

        @Override
        public int hashCode() {
            return Arrays.deepHashCode(new Object[] {value});
        }
    }

    /** The schema's default value. */
    public record Default() implements Arg {
    }

    private static final Default DEFAULT = new Default();
    /** {@link #plan}'s plans, by operator name and then argument kinds; only valid pairs are kept. */
    private static final Map<String, Map<String, CallPlan>> PLANS = new ConcurrentHashMap<>();

    private final Overload overload;
    private final List<Arg> args;
    private final int inputCount;
    private int hash;

    /**
     * A call of {@code overload} with {@code args}, one per schema parameter.
     *
     * @throws IllegalArgumentException when the arguments do not fit the schema (count, a default where none exists, a
     *                                  tensor input where no tensor goes, a list of them where no {@code Tensor[]}
     *                                  goes, a constant that does not {@link #fits} its parameter, inputs not numbered
     *                                  0, 1, ... in order)
     */
    public AtenCall(Overload overload, List<Arg> args) {
        this.overload = Objects.requireNonNull(overload, "overload");
        this.args = List.copyOf(args);
        List<Overload.Param> params = overload.params();
        if (this.args.size() != params.size()) {
            throw new IllegalArgumentException(qualifiedName() + " takes " + params.size() + " arguments, got " + this.args.size());
        }
        int next = 0;
        for (int i = 0; i < params.size(); i++) {
            Overload.Param p = params.get(i);
            Arg a = this.args.get(i);
            if (a instanceof Default && p.defaultValue() == null) {
                throw new IllegalArgumentException(qualifiedName() + ": argument '" + p.name() + "' has no default");
            }
            if (a instanceof Input in) {
                if (p.type().base() != ParamType.Base.TENSOR || p.type().list()) {
                    throw new IllegalArgumentException(qualifiedName() + ": argument '" + p.name() + "' of type " + p.type() + " cannot take a tensor");
                }
                if (in.index() != next++) {
                    throw new IllegalArgumentException(qualifiedName() + ": tensor inputs must be numbered in schema order");
                }
            } else if (a instanceof InputList in) {
                if (p.type().base() != ParamType.Base.TENSOR || !p.type().list()) {
                    throw new IllegalArgumentException(qualifiedName() + ": argument '" + p.name() + "' of type " + p.type() + " cannot take a tensor list");
                }
                if (in.first() != next || in.count() < 0) {
                    throw new IllegalArgumentException(qualifiedName() + ": tensor inputs must be numbered in schema order");
                }
                next += in.count();
            } else if (a instanceof Constant c && !fits(p.type(), c.value())) {
                throw new IllegalArgumentException(qualifiedName() + ": argument '" + p.name() + "' of type " + p.type() + " cannot take "
                    + (c.value() == null ? "None" : c + " (" + c.value().getClass().getSimpleName() + ")"));
            }
        }
        this.inputCount = next;
    }

    /**
     * True when constant {@code value} is what {@link #call} can pass for a parameter of {@code type}: None for an optional
     * parameter; {@code long[]}, {@code double[]} or {@code boolean[]} for a list of ints, floats or bools; otherwise a
     * {@code Long} for an int, a {@code Double} for a float, a {@code Boolean} for a bool, any of the three for a Scalar,
     * a {@code String} for a str, a {@code ScalarType} or a {@code MemoryFormat} for those types. Nothing else is a
     * constant (a tensor goes as an {@link Input}).
     */
    public static boolean fits(ParamType type, Object value) {
        if (value == null) {
            return type.optional();
        }
        if (type.list()) {
            return switch (type.base()) {
                case INT -> value instanceof long[];
                case FLOAT -> value instanceof double[];
                case BOOL -> value instanceof boolean[];
                default -> false;
            };
        }
        return switch (type.base()) {
            case INT -> value instanceof Long;
            case FLOAT -> value instanceof Double;
            case BOOL -> value instanceof Boolean;
            case SCALAR -> value instanceof Long || value instanceof Double || value instanceof Boolean;
            case STR -> value instanceof String;
            case SCALAR_TYPE -> value instanceof ScalarType;
            case MEMORY_FORMAT -> value instanceof MemoryFormat;
            default -> false;
        };
    }

    /**
     * The call a {@link CallPlan} makes of {@code values} (positionals, then keyword values, as the plan's signature key
     * lists them), where each tensor value becomes the next tensor input and a list of tensors (a {@code List} or an
     * array, for a {@code Tensor[]} parameter) the next run of them. Tensor values are only counted here: the caller
     * passes the tensors themselves, lists flattened in order, to whoever runs the call.
     */
    public static AtenCall of(CallPlan plan, Object[] values) {
        List<Arg> args = new ArrayList<>();
        int next = 0;
        List<Overload.Param> params = plan.overload().params();
        for (int i = 0; i < params.size(); i++) {
            ArgSource source = plan.sources()[i];
            if (source.isDefault()) {
                args.add(DEFAULT);
            } else if (source.kind().equals(ArgKind.TENSOR)) {
                args.add(new Input(next++));
            } else if (isTensorList(params.get(i), source.kind())) {
                int count = elements(values[source.index()]).size();
                args.add(new InputList(next, count));
                next += count;
            } else if (source.isPacked()) {
                long[] ints = new long[source.count()];
                for (int k = 0; k < ints.length; k++) {
                    ints[k] = ((Number) values[source.index() + k]).longValue();
                }
                args.add(new Constant(ints));
            } else {
                args.add(new Constant(constant(params.get(i), source.kind(), values[source.index()])));
            }
        }
        return new AtenCall(plan.overload(), args);
    }

    /**
     * The call of operator {@code name} that values of the kinds {@code key} select ({@link ArgKind}; tensor values are
     * only placeholders), the overload chosen as the {@code torch} module chooses it: for Java callers of the generic path.
     *
     * @throws IllegalArgumentException when no overload of {@code name} takes {@code key}
     */
    public static AtenCall of(String name, String key, Object... values) {
        return of(plan(name, key), values);
    }

    /**
     * The plan of operator {@code name} for values of the kinds {@code key}, as {@link #of(String, String, Object...)}
     * chooses it. The Java callers of the generic path (views, comparisons, the derivatives' operators) ask for the same
     * few plans on every operator, so each is chosen once.
     *
     * @throws IllegalArgumentException when there is no operator {@code name}, or no overload of it takes {@code key}
     */
    public static CallPlan plan(String name, String key) {
        CallPlan plan = bestPlan(name, key);
        if (plan == null) {
            throw new IllegalArgumentException("no overload of aten::" + name + " takes " + key + ": " + AtenOps.describe(AtenOps.overloads(name)));
        }
        return plan;
    }

    /**
     * {@link #plan}, or null when no overload of {@code name} takes {@code key} (for a caller with an error of its own, as
     * the {@code torch} module's {@code TypeError}). Each plan is chosen once per name and key.
     *
     * @throws IllegalArgumentException when there is no operator {@code name}
     */
    public static CallPlan bestPlan(String name, String key) {
        Map<String, CallPlan> byKey = PLANS.get(name);
        CallPlan plan = byKey == null ? null : byKey.get(key);
        if (plan != null) {
            return plan;
        }
        List<Overload> overloads = AtenOps.overloads(name);
        if (overloads == null) {
            throw new IllegalArgumentException("no operator aten::" + name);
        }
        plan = AtenOps.bestPlan(overloads, ArgKind.Signature.parse(key));
        if (plan != null) {
            PLANS.computeIfAbsent(name, unused -> new ConcurrentHashMap<>()).put(key, plan);
        }
        return plan;
    }

    private static Object constant(Overload.Param param, String kind, Object value) {
        if (kind.equals(ArgKind.NONE) || value == null) {
            return null;
        }
        ParamType type = param.type();
        if (type.list()) {
            if (kind.equals(ArgKind.INT)) {
                long[] repeated = new long[type.fixedLength()];
                Arrays.fill(repeated, ((Number) value).longValue());
                return repeated;
            }
            List<?> list = elements(value);
            return switch (type.base()) {
                case INT -> {
                    long[] out = new long[list.size()];
                    for (int k = 0; k < out.length; k++) {
                        out[k] = ((Number) list.get(k)).longValue();
                    }
                    yield out;
                }
                case FLOAT -> {
                    double[] out = new double[list.size()];
                    for (int k = 0; k < out.length; k++) {
                        out[k] = ((Number) list.get(k)).doubleValue();
                    }
                    yield out;
                }
                case BOOL -> {
                    boolean[] out = new boolean[list.size()];
                    for (int k = 0; k < out.length; k++) {
                        out[k] = (Boolean) list.get(k);
                    }
                    yield out;
                }
                default -> throw new UnsupportedOperationException(param.name() + ": lists of type " + type
                    + " are not supported on distributed tensors yet");
            };
        }
        return switch (type.base()) {
            case INT -> ((Number) value).longValue();
            case FLOAT -> ((Number) value).doubleValue();
            case BOOL -> (Boolean) value;
            case SCALAR -> switch (kind) {
                case ArgKind.INT -> ((Number) value).longValue();
                case ArgKind.BOOL -> (Boolean) value;
                default -> ((Number) value).doubleValue();
            };
            case STR -> (String) value;
            case SCALAR_TYPE, MEMORY_FORMAT -> value;
            default -> throw new UnsupportedOperationException(param.name() + ": values of type " + type
                + " are not supported on distributed tensors yet");
        };
    }

    /** True for a list of tensors, or an empty list, given for a {@code Tensor[]} parameter. */
    private static boolean isTensorList(Overload.Param param, String kind) {
        return kind.equals(ArgKind.TENSOR_LIST) || kind.equals("[" + ArgKind.EMPTY + "]") && param.type().base() == ParamType.Base.TENSOR;
    }

    /** The elements of a list value, however the caller handed it over: a {@code List} or an {@code Object[]}. */
    private static List<?> elements(Object value) {
        return value instanceof List<?> l ? l : Arrays.asList((Object[]) value);
    }

    /** The overload. */
    public Overload overload() {
        return overload;
    }

    /** The arguments, one per schema parameter. */
    public List<Arg> args() {
        return args;
    }

    /** How many tensor inputs the call takes. */
    public int inputCount() {
        return inputCount;
    }

    /** {@code aten::add.Tensor}. */
    public String qualifiedName() {
        return "aten::" + overload.name() + (overload.overloadName().isEmpty() ? "" : "." + overload.overloadName());
    }

    /** The value of the parameter named {@code name}: its constant, the default's Java value, or null when absent or None. */
    public Object constant(String name) {
        List<Overload.Param> params = overload.params();
        for (int i = 0; i < params.size(); i++) {
            if (params.get(i).name().equals(name)) {
                Arg a = args.get(i);
                if (a instanceof Constant c) {
                    return c.value();
                }
                if (a instanceof Default) {
                    return javaValue(params.get(i).defaultValue());
                }
                return null;
            }
        }
        return null;
    }

    /**
     * Parameter {@code i}'s value where it is a constant or the schema's default (as {@link Constant} holds values: null
     * for None), or this class itself where a tensor goes: the unboxed functions read their arguments with it.
     */
    Object constantValue(int i) {
        return switch (args.get(i)) {
            case Constant c -> c.value();
            case Default d -> overload.defaultValue(i);
            default -> AtenCall.class;
        };
    }

    /** The positions of the tensor inputs the overload writes into (its mutated parameters; every tensor of a written list). */
    public List<Integer> writtenInputs() {
        List<String> mutated = overload.mutatedParams();
        if (mutated.isEmpty()) {
            return List.of();
        }
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < args.size(); i++) {
            if (!mutated.contains(overload.params().get(i).name())) {
                continue;
            }
            if (args.get(i) instanceof Input in) {
                out.add(in.index());
            } else if (args.get(i) instanceof InputList in) {
                for (int k = 0; k < in.count(); k++) {
                    out.add(in.first() + k);
                }
            }
        }
        return List.copyOf(out);
    }

    /** The schema names of the tensor inputs, in input order (optional tensors given as None are not inputs). */
    public List<String> inputNames() {
        List<String> out = new ArrayList<>(inputCount);
        for (int i = 0; i < args.size(); i++) {
            if (args.get(i) instanceof Input) {
                out.add(overload.params().get(i).name());
            }
        }
        return out;
    }

    /** True when the schema has a parameter named {@code name}. */
    public boolean hasParam(String name) {
        for (Overload.Param p : overload.params()) {
            if (p.name().equals(name)) {
                return true;
            }
        }
        return false;
    }

    static Object javaValue(IValue v) {
        if (v == null || v.isNone()) {
            return null;
        }
        if (v.isBool()) {
            return v.toBool();
        }
        if (v.isInt()) {
            return v.toInt();
        }
        if (v.isDouble()) {
            return v.toDouble();
        }
        if (v.isIntList()) {
            return Overload.intList(v);
        }
        return null;
    }

    /**
     * Runs the overload on {@code tensors} (one per tensor input) and returns its tensor results, which the caller owns; a
     * {@code Tensor[]} return gives its tensors in order, in place of the one result.
     *
     * @throws RuntimeException libtorch's error
     * @throws UnsupportedOperationException when the operator returns something other than tensors
     */
    public List<Tensor> call(List<Tensor> tensors) {
        checkCount(tensors);
        DirectCalls.Direct direct = overload.direct();
        if (direct != null) {
            Tensor result = direct.run(this, tensors);
            if (result != null) {
                List<Tensor> out = new ArrayList<>(1);
                out.add(result);
                return out;
            }
        }
        return boxed(tensors);
    }

    private void checkCount(List<Tensor> tensors) {
        if (tensors.size() != inputCount) {
            throw new IllegalArgumentException(qualifiedName() + " takes " + inputCount + " tensors, got " + tensors.size());
        }
    }

    /**
     * {@link #call} through the dispatcher's boxed call, whatever the operator: what {@code call} does for operators
     * without an unboxed function, and the baseline the unboxed ones are measured and tested against.
     */
    public List<Tensor> callBoxed(List<Tensor> tensors) {
        checkCount(tensors);
        return boxed(tensors);
    }

    private List<Tensor> boxed(List<Tensor> tensors) {
        List<Overload.Param> params = overload.params();
        IValue[] owned = new IValue[params.size()];
        int ownedCount = 0;
        Stack reused = STACKS.get();
        boolean own = reused.inUse; // a call made while this thread's stack is in use (a kernel calling a kernel) makes its own
        reused.inUse = true;
        IValueVector stack = own ? new IValueVector() : reused.stack;
        try {
            for (int i = 0; i < params.size(); i++) {
                Arg a = args.get(i);
                IValue v = switch (a) {
                    case Input in -> new IValue(tensors.get(in.index()));
                    case InputList in -> tensorList(params.get(i), tensors.subList(in.first(), in.first() + in.count()));
                    case Constant c -> ivalue(params.get(i), c.value());
                    case Default d -> null;
                };
                if (v == null) {
                    stack.push_back(params.get(i).defaultValue());
                } else {
                    owned[ownedCount++] = v;
                    stack.push_back(v);
                }
            }
            overload.handle().callBoxed(stack);
            long results = stack.size();
            List<Tensor> out = new ArrayList<>((int) results);
            try {
                for (long i = 0; i < results; i++) {
                    IValue r = stack.get(i);
                    if (r.isTensor()) {
                        try (Tensor ref = r.toTensor()) { // a view of the stack's value: copy the handle before the stack goes
                            out.add(new Tensor(ref));
                        }
                        continue;
                    }
                    if (r.isTensorList()) {
                        try (TensorVector list = r.toTensorVector()) {
                            for (long k = 0; k < list.size(); k++) {
                                try (Tensor ref = list.get(k)) {
                                    out.add(new Tensor(ref));
                                }
                            }
                        }
                        continue;
                    }
                    throw new UnsupportedOperationException(qualifiedName() + " returns a value that is not a tensor; only operators "
                        + "that return tensors or tensor lists run on distributed tensors");
                }
            } catch (RuntimeException e) {
                out.forEach(Tensor::close);
                throw e;
            }
            return out;
        } finally {
            stack.clear(); // drops the stack's references to the inputs and results
            if (own) {
                stack.close();
            } else {
                reused.inUse = false;
            }
            for (int i = 0; i < ownedCount; i++) {
                owned[i].close();
            }
        }
    }

    /**
     * A thread's reusable call stack: one JavaCPP handle less per call, which keeps the generic path near the
     * hand-written specs on small tensors. Cleared after every call so it holds no tensor.
     */
    private static final class Stack {
        final IValueVector stack = new IValueVector();
        boolean inUse;
    }

    /** Each thread's stack; it lives as long as the thread (a worker's or the client's). */
    private static final ThreadLocal<Stack> STACKS = ThreadLocal.withInitial(Stack::new);

    private static IValue tensorList(Overload.Param param, List<Tensor> tensors) {
        try (GenericList list = new GenericList(param.elementType())) {
            for (Tensor t : tensors) {
                try (IValue e = new IValue(t)) {
                    list.push_back(e);
                }
            }
            return new IValue(list);
        }
    }

    private static IValue ivalue(Overload.Param param, Object value) {
        if (value == null) {
            return new IValue();
        }
        if (param.type().list()) {
            GenericList list = new GenericList(param.elementType());
            try (list) {
                int n = value instanceof long[] l ? l.length : value instanceof double[] d ? d.length : ((boolean[]) value).length;
                for (int k = 0; k < n; k++) {
                    IValue e = value instanceof long[] l ? new IValue(l[k]) : value instanceof double[] d ? new IValue(d[k])
                        : new IValue(((boolean[]) value)[k]);
                    try (e) {
                        list.push_back(e);
                    }
                }
                return new IValue(list);
            }
        }
        return switch (value) {
            case Long l -> new IValue(l.longValue());
            case Double d -> new IValue(d.doubleValue());
            case Boolean b -> new IValue(b.booleanValue());
            case String s -> new IValue(s);
            case ScalarType t -> new IValue(t);
            case MemoryFormat m -> new IValue(m);
            default -> throw new IllegalArgumentException(param.name() + ": unsupported constant " + value);
        };
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof AtenCall c && c.overload == overload && c.args.equals(args);
    }

    @Override
    public int hashCode() {
        // Computed once: a call is hashed several times as it is added (the keys of decisions and inferences).
        int h = hash;
        if (h == 0) {
            h = overload.hashCode() * 31 + args.hashCode();
            hash = h;
        }
        return h;
    }

    /** {@code aten::sum.dim_IntList(#0, [1], false, default)}. */
    @Override
    public String toString() {
        List<String> out = new ArrayList<>();
        for (Arg a : args) {
            out.add(switch (a) {
                case Input in -> "#" + in.index();
                case InputList in -> in.count() == 0 ? "[]" : "[#" + in.first() + "..#" + (in.first() + in.count() - 1) + "]";
                case Constant c -> c.toString();
                case Default d -> "default";
            });
        }
        return qualifiedName() + "(" + String.join(", ", out) + ")";
    }
}
