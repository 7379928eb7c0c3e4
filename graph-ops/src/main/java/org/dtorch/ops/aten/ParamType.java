package org.dtorch.ops.aten;

import org.bytedeco.pytorch.Argument;
import org.bytedeco.pytorch.Type;
import org.bytedeco.pytorch.global.torch.TypeKind;

/**
 * The type of one parameter of an ATen schema, reduced to what binding Python values needs: a base kind,
 * whether {@code None} is accepted ({@code Tensor?}), whether it is a list ({@code int[2]}, {@code Tensor?[]})
 * and, for lists, the fixed length a single int may stand for ({@code int[2] stride=1} takes {@code stride=2}).
 *
 * <p>Read from the argument's real type, so {@code ScalarType}, {@code SymInt}, {@code Device} and
 * {@code MemoryFormat} stay distinct from {@code int} and {@code str} (the schema's declared type folds them).
 *
 * @param base          the element kind
 * @param optional      {@code T?}: None is accepted
 * @param list          {@code T[]}
 * @param elementOptional {@code T?[]}: None is accepted inside the list ({@code aten::index})
 * @param fixedLength   the {@code N} of {@code int[N]}, or 0
 *
 * <p>Immutable, so thread-safe.
 */
public record ParamType(Base base, boolean optional, boolean list, boolean elementOptional, int fixedLength) {

    /** Element kinds of schema parameters. */
    public enum Base { TENSOR, SCALAR, INT, FLOAT, BOOL, STR, SCALAR_TYPE, LAYOUT, DEVICE, MEMORY_FORMAT, GENERATOR, OTHER }

    /** The type of {@code argument}. */
    public static ParamType of(Argument argument) {
        Type type = argument.real_type().get();
        boolean optional = false;
        if (type.kind().intern() == TypeKind.OptionalType) {
            optional = true;
            type = type.containedType(0).get();
        }
        int n = argument.N().has_value() ? argument.N().get() : 0;
        if (type.kind().intern() == TypeKind.ListType) {
            Type element = type.containedType(0).get();
            boolean elementOptional = false;
            if (element.kind().intern() == TypeKind.OptionalType) {
                elementOptional = true;
                element = element.containedType(0).get();
            }
            return new ParamType(baseOf(element.kind().intern()), optional, true, elementOptional, n);
        }
        return new ParamType(baseOf(type.kind().intern()), optional, false, false, 0);
    }

    private static Base baseOf(TypeKind kind) {
        return switch (kind) {
            case TensorType -> Base.TENSOR;
            case NumberType -> Base.SCALAR;
            case IntType, SymIntType -> Base.INT;
            case FloatType, SymFloatType -> Base.FLOAT;
            case BoolType, SymBoolType -> Base.BOOL;
            case StringType -> Base.STR;
            case ScalarTypeType -> Base.SCALAR_TYPE;
            case LayoutType -> Base.LAYOUT;
            case DeviceObjType -> Base.DEVICE;
            case MemoryFormatType -> Base.MEMORY_FORMAT;
            case GeneratorType -> Base.GENERATOR;
            default -> Base.OTHER;
        };
    }

    /**
     * What binding a Python value of {@code kind} ({@link ArgKind}) to this parameter costs: 0 for an exact fit,
     * more for a conversion PyTorch's argument parser also makes (an int where a float or a Scalar goes, one
     * int for a fixed-length list), {@link #NO_FIT} when it cannot go there. The overload with the lowest
     * total wins, so {@code add(t, t2)} takes {@code add.Tensor} and {@code add(t, 2)} {@code add.Scalar}.
     */
    public int cost(String kind) {
        if (kind.equals(ArgKind.NONE)) {
            return optional ? 0 : NO_FIT;
        }
        if (list) {
            return listCost(kind);
        }
        return switch (kind) {
            case ArgKind.TENSOR -> base == Base.TENSOR ? 0 : NO_FIT;
            case ArgKind.INT -> switch (base) {
                case INT -> 0;
                case FLOAT, SCALAR -> 1;
                default -> NO_FIT;
            };
            case ArgKind.FLOAT -> switch (base) {
                case FLOAT -> 0;
                case SCALAR -> 1;
                default -> NO_FIT;
            };
            case ArgKind.BOOL -> switch (base) {
                case BOOL -> 0;
                case SCALAR -> 2;
                default -> NO_FIT;
            };
            case ArgKind.STR -> switch (base) {
                case STR -> 0;
                case DEVICE -> 1; // device="cuda"
                default -> NO_FIT;
            };
            case ArgKind.DTYPE -> base == Base.SCALAR_TYPE ? 0 : NO_FIT;
            case ArgKind.DEVICE -> base == Base.DEVICE ? 0 : NO_FIT;
            case ArgKind.MEMORY_FORMAT -> base == Base.MEMORY_FORMAT ? 0 : NO_FIT;
            default -> NO_FIT;
        };
    }

    private int listCost(String kind) {
        if (kind.equals(ArgKind.INT) && base == Base.INT && fixedLength > 0) {
            return 1; // stride=2 for int[2] stride
        }
        if (!ArgKind.isList(kind)) {
            return NO_FIT;
        }
        String element = ArgKind.element(kind);
        return switch (element) {
            case ArgKind.EMPTY -> base == Base.OTHER ? NO_FIT : 0;
            case ArgKind.INT -> base == Base.INT ? 0 : base == Base.FLOAT || base == Base.SCALAR ? 1 : NO_FIT;
            case ArgKind.FLOAT -> base == Base.FLOAT ? 0 : base == Base.SCALAR ? 1 : NO_FIT;
            case ArgKind.BOOL -> base == Base.BOOL ? 0 : NO_FIT;
            case ArgKind.STR -> base == Base.STR ? 0 : NO_FIT;
            case ArgKind.TENSOR -> base == Base.TENSOR ? (elementOptional ? 1 : 0) : NO_FIT;
            case ArgKind.TENSOR_OR_NONE -> base == Base.TENSOR && elementOptional ? 0 : NO_FIT;
            default -> NO_FIT;
        };
    }

    /** The cost of a value that cannot go to the parameter. */
    public static final int NO_FIT = 1_000_000;

    /** The schema spelling: {@code Tensor?}, {@code int[2]}, {@code ScalarType?}. */
    @Override
    public String toString() {
        String name = switch (base) {
            case TENSOR -> "Tensor";
            case SCALAR -> "Scalar";
            case INT -> "int";
            case FLOAT -> "float";
            case BOOL -> "bool";
            case STR -> "str";
            case SCALAR_TYPE -> "ScalarType";
            case LAYOUT -> "Layout";
            case DEVICE -> "Device";
            case MEMORY_FORMAT -> "MemoryFormat";
            case GENERATOR -> "Generator";
            case OTHER -> "?";
        };
        if (list) {
            name = name + (elementOptional ? "?" : "") + "[" + (fixedLength > 0 ? fixedLength : "") + "]";
        }
        return optional ? name + "?" : name;
    }
}
