package org.dtorch.polyglot.torch;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.GenericList;
import org.bytedeco.pytorch.IValue;
import org.bytedeco.pytorch.IValueVector;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.dtorch.ops.aten.ArgKind;
import org.dtorch.ops.aten.ArgSource;
import org.dtorch.ops.aten.CallPlan;
import org.dtorch.ops.aten.Overload;
import org.dtorch.ops.aten.ParamType;
import org.graalvm.polyglot.HostAccess;
import org.graalvm.polyglot.Value;

/**
 * One operator overload with a fixed way of taking a call's arguments: the result of resolving a signature key
 * ({@link ArgKind}) once. {@link #call(Object...)} turns the Python values into {@link IValue}s in schema order
 * (defaults from the schema where the call gave none), runs the overload through the dispatcher
 * ({@code OperatorHandle.callBoxed}) and turns the returns into {@link PyTensor}s and Java numbers.
 *
 * <p>Each thread calls with a stack of its own (a thread-local {@link IValueVector}); the plan is immutable.
 * Thread-safe: Python threads may call concurrently (GraalPy releases the GIL around host calls).
 */
public final class BoundCall {
    private static final IValue NONE = new IValue();
    private static final IValue TRUE = new IValue(true);
    private static final IValue FALSE = new IValue(false);
    private static final ThreadLocal<IValueVector> STACKS = ThreadLocal.withInitial(IValueVector::new);

    private final CallPlan plan;
    private final Overload overload;
    private final Overload.Param[] params;
    private final ArgSource[] sources;
    private final String returnKind;

    BoundCall(CallPlan plan) {
        this.plan = plan;
        this.overload = plan.overload();
        this.params = plan.overload().params().toArray(Overload.Param[]::new);
        this.sources = plan.sources().clone();
        List<String> returns = overload.returnTypes();
        this.returnKind = returns.isEmpty() ? "n" : returns.size() == 1 ? returns.get(0) : "(" + String.join(",", returns) + ")";
    }

    /** The overload and the sources of its parameters (what the distributed path builds its call from). */
    public CallPlan plan() {
        return plan;
    }

    /**
     * How Python wraps what {@link #call} returns: {@code T} a tensor, {@code [T]} a list of tensors,
     * {@code (T,T)} a tuple (Java gives an array), {@code i f b S} a number, {@code n} None.
     */
    @HostAccess.Export
    public String returnKind() {
        return returnKind;
    }

    /** The names of the returns ({@code values}, {@code indices}), empty strings where unnamed. */
    @HostAccess.Export
    public String[] returnNames() {
        return overload.returnNames().toArray(String[]::new);
    }

    /** The schema this call runs: {@code aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor}. */
    @HostAccess.Export
    public String schema() {
        return overload.signature();
    }

    /**
     * Runs the overload with the call's values (positionals then keyword values, in the order of the signature
     * key this call was resolved for): {@link PyTensor}s, numbers, strings (also dtype, device and memory-format
     * names), null for None, and lists of those.
     *
     * @return a {@link PyTensor}, an array for several returns, a {@code Long}, {@code Double} or {@code Boolean},
     *         or null
     * @throws RuntimeException libtorch's error, with its message (Python raises {@code RuntimeError})
     */
    @HostAccess.Export
    public Object call(Object... values) {
        return run(values);
    }

    /** {@link #call} with one value (unambiguous where the value is a list: varargs would spread it). */
    @HostAccess.Export
    public Object call1(Object value) {
        return run(new Object[] {value});
    }

    /** {@link #call} with two values. */
    @HostAccess.Export
    public Object call2(Object first, Object second) {
        return run(new Object[] {first, second});
    }

    /** {@link #call} with three values. */
    @HostAccess.Export
    public Object call3(Object first, Object second, Object third) {
        return run(new Object[] {first, second, third});
    }

    private Object run(Object[] values) {
        IValueVector stack = STACKS.get();
        List<IValue> temporaries = null;
        try {
            for (int i = 0; i < params.length; i++) {
                ArgSource source = sources[i];
                if (source.index() < 0) {
                    stack.push_back(params[i].defaultValue());
                    continue;
                }
                if (source.kind().equals(ArgKind.TENSOR)) {
                    ((PyTensor) values[source.index()]).pushTo(stack);
                    continue;
                }
                IValue v = convert(params[i], source, values);
                stack.push_back(v);
                if (v != NONE && v != TRUE && v != FALSE) {
                    if (temporaries == null) {
                        temporaries = new ArrayList<>(4);
                    }
                    temporaries.add(v);
                }
            }
            overload.handle().callBoxed(stack);
            return results(stack);
        } finally {
            stack.resize(0);
            if (temporaries != null) {
                temporaries.forEach(IValue::close);
            }
        }
    }

    private Object results(IValueVector stack) {
        long n = stack.size();
        if (n == 0) {
            return null;
        }
        if (n == 1) {
            return result(stack.get(0));
        }
        Object[] out = new Object[(int) n];
        for (int i = 0; i < n; i++) {
            out[i] = result(stack.get(i));
        }
        return out;
    }

    private static Object result(IValue v) {
        if (v.isTensor()) {
            return PyTensor.adopt(new IValue(v));
        }
        if (v.isInt()) {
            return v.toInt();
        }
        if (v.isDouble()) {
            return v.toDouble();
        }
        if (v.isBool()) {
            return v.toBool();
        }
        if (v.isNone()) {
            return null;
        }
        if (v.isTensorList()) {
            try (TensorVector tensors = v.toTensorVector()) {
                Object[] out = new Object[(int) tensors.size()];
                for (int i = 0; i < out.length; i++) {
                    try (Tensor t = tensors.get(i)) {
                        out[i] = PyTensor.adopt(new IValue(t));
                    }
                }
                return out;
            }
        }
        throw new UnsupportedOperationException("torch: a return value of this kind is not supported yet (only tensors, tensor lists and numbers)");
    }

    private static IValue convert(Overload.Param param, ArgSource source, Object[] values) {
        ParamType type = param.type();
        if (source.count() > 1 || source.kind().equals("*i")) {
            return intList(param, Arrays.asList(values).subList(source.index(), source.index() + source.count()));
        }
        Object value = values[source.index()];
        String kind = source.kind();
        if (kind.equals(ArgKind.NONE)) {
            return NONE;
        }
        if (type.list()) {
            if (kind.equals(ArgKind.INT)) {
                Object[] repeated = new Object[type.fixedLength()];
                Arrays.fill(repeated, value);
                return intList(param, Arrays.asList(repeated));
            }
            return list(param, elements(value));
        }
        return switch (type.base()) {
            case INT -> new IValue(asLong(value));
            case FLOAT -> new IValue(asDouble(value));
            case BOOL -> asBoolean(value) ? TRUE : FALSE;
            case SCALAR -> switch (kind) {
                case ArgKind.INT -> new IValue(asLong(value));
                case ArgKind.BOOL -> asBoolean(value) ? TRUE : FALSE;
                default -> new IValue(asDouble(value));
            };
            case STR -> new IValue((String) value);
            case SCALAR_TYPE -> new IValue(Dtypes.scalarType((String) value));
            case DEVICE -> {
                try (Device d = new Device((String) value)) {
                    yield new IValue(d);
                }
            }
            case MEMORY_FORMAT -> new IValue(ArgKind.memoryFormat((String) value));
            default -> throw new IllegalArgumentException(param.name() + ": values of type " + type + " are not supported yet");
        };
    }

    private static IValue intList(Overload.Param param, List<?> values) {
        GenericList list = new GenericList(param.elementType());
        try (list) {
            for (Object v : values) {
                try (IValue e = new IValue(asLong(v))) {
                    list.push_back(e);
                }
            }
            return new IValue(list);
        }
    }

    private static IValue list(Overload.Param param, List<?> values) {
        ParamType type = param.type();
        GenericList list = new GenericList(param.elementType());
        try (list) {
            for (Object v : values) {
                if (v == null) {
                    list.push_back(NONE);
                    continue;
                }
                IValue e = switch (type.base()) {
                    case TENSOR -> ((PyTensor) v).newValue();
                    case INT -> new IValue(asLong(v));
                    case FLOAT -> new IValue(asDouble(v));
                    case SCALAR -> isIntegral(v) ? new IValue(asLong(v)) : new IValue(asDouble(v));
                    case BOOL -> new IValue(asBoolean(v));
                    case STR -> new IValue((String) v);
                    default -> throw new IllegalArgumentException(param.name() + ": lists of type " + type + " are not supported yet");
                };
                try (e) {
                    list.push_back(e);
                }
            }
            return new IValue(list);
        }
    }

    /** The elements of a Python list or tuple, however GraalPy handed it over. */
    private static List<?> elements(Object value) {
        if (value instanceof List<?> l) {
            return l;
        }
        if (value instanceof Object[] a) {
            return Arrays.asList(a);
        }
        if (value instanceof Value v && v.hasArrayElements()) {
            List<Object> out = new ArrayList<>();
            for (long i = 0; i < v.getArraySize(); i++) {
                Value e = v.getArrayElement(i);
                out.add(e.isNull() ? null : e.isHostObject() ? e.asHostObject() : e.isString() ? e.asString()
                    : e.isBoolean() ? e.asBoolean() : e.fitsInLong() ? (Object) e.asLong() : (Object) e.asDouble());
            }
            return out;
        }
        throw new IllegalArgumentException("expected a list, got " + value);
    }

    private static boolean isIntegral(Object value) {
        if (value instanceof Value v) {
            return v.fitsInLong();
        }
        return value instanceof Long || value instanceof Integer;
    }

    private static long asLong(Object value) {
        if (value instanceof Value v) {
            return v.asLong();
        }
        return ((Number) value).longValue();
    }

    private static double asDouble(Object value) {
        if (value instanceof Value v) {
            return v.asDouble();
        }
        return ((Number) value).doubleValue();
    }

    private static boolean asBoolean(Object value) {
        if (value instanceof Value v) {
            return v.asBoolean();
        }
        return (Boolean) value;
    }

    @Override
    public String toString() {
        return "BoundCall(" + overload.signature() + ")";
    }
}
