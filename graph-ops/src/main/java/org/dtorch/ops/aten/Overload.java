package org.dtorch.ops.aten;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.AliasInfo;
import org.bytedeco.pytorch.Argument;
import org.bytedeco.pytorch.FunctionSchema;
import org.bytedeco.pytorch.IValue;
import org.bytedeco.pytorch.IValueOptional;
import org.bytedeco.pytorch.OperatorHandle;
import org.bytedeco.pytorch.Type;
import org.bytedeco.pytorch.global.torch.TypeKind;

/**
 * One overload of an ATen operator, read once from the dispatcher: its handle, its parameters (name, type,
 * keyword-only, default) and its returns. {@link #bind} fits a call's {@link ArgKind.Signature} to it the way
 * Python binds a call to a function (positionals, then keywords by name, then defaults), plus PyTorch's
 * varargs rule: when the last positional parameter is an int list, trailing ints fill it ({@code t.view(2, 3)},
 * {@code torch.zeros(2, 3)}).
 *
 * <p>Immutable after construction (the handle and the default values are never modified), so thread-safe;
 * it lives as long as the process, as the dispatcher's operators do.
 */
public final class Overload {
    /** One parameter. {@code defaultValue} is null when the parameter is required. */
    public record Param(String name, ParamType type, boolean kwargOnly, IValue defaultValue, String defaultText, Type.TypePtr elementType) {
    }

    private final String name;
    private final String overloadName;
    private final OperatorHandle handle;
    private final List<Param> params;
    private final int positionalCount;
    private final List<String> returnTypes;
    private final List<String> returnNames;
    /** The parameters the operator writes into (alias annotation {@code (a!)}), by name, in order. */
    private final List<String> mutated;
    /** True when a return aliases an input without writing it (a view: {@code Tensor(a)}). */
    private final boolean returnsView;

    public Overload(String name, String overloadName, OperatorHandle handle) {
        this.name = name;
        this.overloadName = overloadName;
        this.handle = handle;
        FunctionSchema schema = handle.schema();
        Argument arguments = schema.arguments();
        List<Param> ps = new ArrayList<>();
        List<String> writes = new ArrayList<>();
        int positional = 0;
        // An empty argument or return list comes back as a null pointer (the vector's data() of nothing).
        long argumentCount = arguments == null ? 0 : arguments.limit();
        for (long i = 0; i < argumentCount; i++) {
            Argument a = arguments.getPointer(i);
            ParamType type = ParamType.of(a);
            IValueOptional dv = a.default_value();
            IValue def = dv.has_value() ? new IValue(dv.get()) : null;
            ps.add(new Param(a.name().getString(), type, a.kwarg_only(), def, def == null ? null : describe(def), elementType(a)));
            AliasInfo alias = a.alias_info();
            if (alias != null && !alias.isNull() && alias.isWrite()) {
                writes.add(a.name().getString());
            }
            if (!a.kwarg_only()) {
                positional++;
            }
        }
        this.params = List.copyOf(ps);
        this.positionalCount = positional;
        this.mutated = List.copyOf(writes);
        Argument returns = schema.returns();
        List<String> types = new ArrayList<>();
        List<String> names = new ArrayList<>();
        boolean view = false;
        long returnCount = returns == null ? 0 : returns.limit();
        for (long i = 0; i < returnCount; i++) {
            Argument r = returns.getPointer(i);
            AliasInfo alias = r.alias_info();
            view |= alias != null && !alias.isNull() && !alias.isWrite();
            types.add(returnKind(r.real_type().get()));
            String n = r.name() == null ? "" : r.name().getString();
            names.add(n);
        }
        this.returnsView = view;
        this.returnTypes = List.copyOf(types);
        this.returnNames = List.copyOf(names);
    }

    /** The list's element type as the schema declares it (the type a {@code GenericList} of it needs), or null. */
    private static Type.TypePtr elementType(Argument a) {
        Type type = a.type().get();
        if (type.kind().intern() == TypeKind.OptionalType) {
            type = type.containedType(0).get();
        }
        return type.kind().intern() == TypeKind.ListType ? type.containedType(0) : null;
    }

    /** {@code T} tensor, {@code [T]} tensor list, {@code i f b} numbers, {@code S} a Scalar, {@code n} none, {@code ?} other. */
    private static String returnKind(Type t) {
        return switch (t.kind().intern()) {
            case TensorType -> "T";
            case ListType -> t.containedType(0).get().kind().intern() == TypeKind.TensorType ? "[T]" : "?";
            case IntType, SymIntType -> "i";
            case FloatType, SymFloatType -> "f";
            case BoolType -> "b";
            case NumberType -> "S";
            case NoneType -> "n";
            default -> "?";
        };
    }

    private static String describe(IValue v) {
        if (v.isNone()) {
            return "None";
        }
        if (v.isBool()) {
            return v.toBool() ? "True" : "False";
        }
        if (v.isInt()) {
            return Long.toString(v.toInt());
        }
        if (v.isDouble()) {
            return Double.toString(v.toDouble());
        }
        if (v.isString()) {
            return "\"" + v.toConstantString().string().getString() + "\"";
        }
        if (v.isIntList()) {
            return java.util.Arrays.toString(intList(v));
        }
        return "...";
    }

    /** The values of an int-list {@code IValue}, read through one native vector (closed here). */
    static long[] intList(IValue v) {
        try (org.bytedeco.pytorch.LongVector vector = v.toIntVector()) {
            long[] values = new long[Math.toIntExact(vector.size())];
            for (int i = 0; i < values.length; i++) {
                values[i] = vector.get(i);
            }
            return values;
        }
    }

    public String name() {
        return name;
    }

    /** Where an overload has no unboxed function: {@link #direct()} resolves once either way. */
    private static final DirectCalls.Direct BOXED = (call, tensors) -> null;
    /** The unboxed function {@link AtenCall#call} runs instead of the boxed call ({@link #BOXED} for none); resolved once. */
    private volatile DirectCalls.Direct direct;
    /** The parameters' defaults as the Java values of {@link AtenCall}'s constants, read once. */
    private volatile Object[] defaultValues;

    /** The unboxed function of this overload, or null where it has none. */
    DirectCalls.Direct direct() {
        DirectCalls.Direct d = direct;
        if (d == null) {
            d = Objects.requireNonNullElse(DirectCalls.of(this), BOXED);
            direct = d;
        }
        return d == BOXED ? null : d;
    }

    /** Parameter {@code i}'s default as a Java value (null for None or where there is none). */
    Object defaultValue(int i) {
        Object[] values = defaultValues;
        if (values == null) {
            values = new Object[params.size()];
            for (int k = 0; k < values.length; k++) {
                values[k] = AtenCall.javaValue(params.get(k).defaultValue());
            }
            defaultValues = values;
        }
        return values[i];
    }

    public OperatorHandle handle() {
        return handle;
    }

    public List<Param> params() {
        return params;
    }

    public List<String> returnTypes() {
        return returnTypes;
    }

    public List<String> returnNames() {
        return returnNames;
    }

    /** The names of the parameters the operator writes into ({@code self} of {@code add_}, {@code out} of {@code add.out}). */
    public List<String> mutatedParams() {
        return mutated;
    }

    /** True when the operator returns a view of an input ({@code select}, {@code transpose}, {@code view}, {@code split}). */
    public boolean returnsView() {
        return returnsView;
    }

    /** The overload name, empty for the default overload. */
    public String overloadName() {
        return overloadName;
    }

    /**
     * How a call of {@code signature} binds to this overload, or null when it cannot: for each parameter, where its
     * value comes from ({@link ArgSource}) and at what cost ({@link ParamType#cost}).
     */
    public CallPlan bind(ArgKind.Signature signature) {
        List<String> positional = signature.positional();
        int n = params.size();
        ArgSource[] sources = new ArgSource[n];
        int cost = 0;
        int packFrom = -1;
        if (positionalCount > 0 && positional.size() >= positionalCount) {
            Param last = params.get(positionalCount - 1);
            int from = positionalCount - 1;
            boolean trailingInts = from < positional.size() && positional.subList(from, positional.size()).stream().allMatch(ArgKind.INT::equals);
            if (last.type().list() && last.type().base() == ParamType.Base.INT && trailingInts
                && (positional.size() > positionalCount || last.type().fixedLength() == 0)) {
                packFrom = from;
            }
        }
        int given = packFrom >= 0 ? packFrom : positional.size();
        if (given > positionalCount) {
            return null;
        }
        for (int i = 0; i < given; i++) {
            int c = params.get(i).type().cost(positional.get(i));
            if (c >= ParamType.NO_FIT) {
                return null;
            }
            cost += c;
            sources[i] = ArgSource.positional(i, positional.get(i));
        }
        if (packFrom >= 0) {
            sources[packFrom] = ArgSource.packed(packFrom, positional.size() - packFrom);
            cost += 1;
        }
        for (int k = 0; k < signature.keywordNames().size(); k++) {
            String keyword = signature.keywordNames().get(k);
            int index = indexOf(keyword);
            if (index < 0 || sources[index] != null) {
                return null;
            }
            String kind = signature.keywordKinds().get(k);
            int c = params.get(index).type().cost(kind);
            if (c >= ParamType.NO_FIT) {
                return null;
            }
            cost += c;
            sources[index] = ArgSource.keyword(positional.size() + k, kind);
        }
        for (int i = 0; i < n; i++) {
            if (sources[i] == null) {
                if (params.get(i).defaultValue() == null) {
                    return null;
                }
                sources[i] = ArgSource.DEFAULT;
            }
        }
        return new CallPlan(this, sources, cost);
    }

    private int indexOf(String paramName) {
        for (int i = 0; i < params.size(); i++) {
            if (params.get(i).name().equals(paramName)) {
                return i;
            }
        }
        return -1;
    }

    /** {@code aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor}. */
    public String signature() {
        StringBuilder out = new StringBuilder("aten::").append(name);
        if (!overloadName.isEmpty()) {
            out.append('.').append(overloadName);
        }
        out.append('(');
        boolean star = false;
        for (int i = 0; i < params.size(); i++) {
            Param p = params.get(i);
            if (i > 0) {
                out.append(", ");
            }
            if (p.kwargOnly() && !star) {
                out.append("*, ");
                star = true;
            }
            out.append(p.type()).append(' ').append(p.name());
            if (p.defaultText() != null) {
                out.append('=').append(p.defaultText());
            }
        }
        out.append(") -> ");
        List<String> rs = new ArrayList<>();
        for (String r : returnTypes) {
            rs.add(switch (r) {
                case "T" -> "Tensor";
                case "[T]" -> "Tensor[]";
                case "i" -> "int";
                case "f" -> "float";
                case "b" -> "bool";
                case "S" -> "Scalar";
                default -> "?";
            });
        }
        return out.append(rs.size() == 1 ? rs.get(0) : "(" + String.join(", ", rs) + ")").toString();
    }

    @Override
    public String toString() {
        return signature();
    }
}
