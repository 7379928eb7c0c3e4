package org.dtorch.ops.aten;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.bytedeco.pytorch.global.torch.MemoryFormat;

/**
 * The kinds of Python values the {@code torch} package passes, as it spells them in a call's signature key.
 * Python classifies each argument once ({@code torch/_dispatch.py}) and joins the kinds into a key such as
 * {@code "T,i|dim=i"}: the positional kinds separated by commas, then {@code |name=kind} for each keyword.
 * The key alone decides the overload, so Java resolves a key once per operator and caches the plan.
 *
 * <pre>
 *  T  a torch.Tensor          i  an int (within int64)      f  a float         b  a bool
 *  n  None                    s  a str                      d  a torch.dtype   v  a torch.device
 *  m  a torch.memory_format   [e] an empty list or tuple    [x] a list of x (x one of i f b s T),
 *  [o] a list of Tensors and Nones (at least one None)      ?  anything else
 * </pre>
 *
 * <p>Stateless: thread-safe.
 */
public final class ArgKind {
    public static final String TENSOR = "T";
    public static final String INT = "i";
    public static final String FLOAT = "f";
    public static final String BOOL = "b";
    public static final String NONE = "n";
    public static final String STR = "s";
    public static final String DTYPE = "d";
    public static final String DEVICE = "v";
    public static final String MEMORY_FORMAT = "m";
    public static final String EMPTY = "e";
    public static final String TENSOR_OR_NONE = "o";
    /** The whole kind of a list of tensors. */
    public static final String TENSOR_LIST = "[T]";

    private ArgKind() {
    }

    public static boolean isList(String kind) {
        return kind.length() == 3 && kind.charAt(0) == '[' && kind.charAt(2) == ']';
    }

    public static String element(String kind) {
        return kind.substring(1, 2);
    }

    /**
     * The memory format a value of kind {@code m} names ({@code contiguous_format}, {@code preserve_format},
     * {@code channels_last}, {@code channels_last_3d}, as Python passes it).
     *
     * @throws IllegalArgumentException for any other name
     */
    public static MemoryFormat memoryFormat(String name) {
        return switch (name.toLowerCase(Locale.ROOT)) {
            case "contiguous_format" -> MemoryFormat.Contiguous;
            case "preserve_format" -> MemoryFormat.Preserve;
            case "channels_last" -> MemoryFormat.ChannelsLast;
            case "channels_last_3d" -> MemoryFormat.ChannelsLast3d;
            default -> throw new IllegalArgumentException("unknown memory format '" + name + "'");
        };
    }

    /** A Python reading of a kind, for error messages. */
    public static String describe(String kind) {
        if (isList(kind)) {
            String e = element(kind);
            return e.equals(EMPTY) ? "empty list" : "list of " + describe(e).replace("a ", "") + "s";
        }
        return switch (kind) {
            case TENSOR -> "Tensor";
            case INT -> "int";
            case FLOAT -> "float";
            case BOOL -> "bool";
            case NONE -> "None";
            case STR -> "str";
            case DTYPE -> "dtype";
            case DEVICE -> "device";
            case MEMORY_FORMAT -> "memory_format";
            case TENSOR_OR_NONE -> "Tensor or None";
            default -> "unsupported value";
        };
    }

    /** A parsed signature key. */
    public record Signature(List<String> positional, List<String> keywordNames, List<String> keywordKinds) {

        public static Signature parse(String key) {
            String[] parts = key.split("\\|", -1);
            List<String> positional = new ArrayList<>();
            if (!parts[0].isEmpty()) {
                positional.addAll(List.of(parts[0].split(",", -1)));
            }
            List<String> names = new ArrayList<>();
            List<String> kinds = new ArrayList<>();
            for (int i = 1; i < parts.length; i++) {
                int eq = parts[i].indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("malformed signature key '" + key + "'");
                }
                names.add(parts[i].substring(0, eq));
                kinds.add(parts[i].substring(eq + 1));
            }
            return new Signature(positional, names, kinds);
        }

        /** {@code (Tensor, int, dim=int)}, for messages. */
        public String describe() {
            List<String> out = new ArrayList<>();
            positional.forEach(k -> out.add(ArgKind.describe(k)));
            for (int i = 0; i < keywordNames.size(); i++) {
                out.add(keywordNames.get(i) + "=" + ArgKind.describe(keywordKinds.get(i)));
            }
            return "(" + String.join(", ", out) + ")";
        }
    }
}
