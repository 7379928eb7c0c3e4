package org.dtorch.ops;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.global.torch.MemoryFormat;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.runtime.process.ProtocolException;
import org.dtorch.core.runtime.process.WireReader;
import org.dtorch.core.runtime.process.WireWriter;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenOps;
import org.dtorch.ops.aten.Overload;

/**
 * An {@link AtenCall} on the control channel, for {@link AtenSpec} in per-device-process mode: the overload by name and
 * its arguments, one per schema parameter. The worker finds the overload again by name in its own dispatcher
 * ({@link AtenOps#overload}) and rebuilds the call through {@link AtenCall}'s validating constructor, so a decoded call
 * fits its schema exactly as one made in the controller does.
 *
 * <pre>
 *   +--------------+-----------------------+------------+---------------------------------------+
 *   | name: string | overload name: string | count: int | count x (kind: byte, value as below)   |
 *   +--------------+-----------------------+------------+---------------------------------------+
 *   kind  argument        value
 *    0    input           int: the index of the tensor input
 *    1    default         (none: the schema's default)
 *    2    None            (none)
 *    3    Long            long
 *    4    Double          double (its IEEE bits, so NaN and -0.0 cross exactly)
 *    5    Boolean         byte 0 or 1
 *    6    String          string (int length, UTF-8)
 *    7    ScalarType      int: libtorch's dtype code
 *    8    MemoryFormat    byte: the ordinal of torch.MemoryFormat
 *    9    long[]          int count, count x long
 *   10    double[]        int count, count x double
 *   11    boolean[]       int count, count x byte 0 or 1
 *   12    input list      int first, int count: the tensor inputs first .. first+count-1 (a Tensor[] parameter)
 * </pre>
 *
 * Strings are {@link WireWriter#putString}'s, the empty overload name is the default overload.
 *
 * <p>Thread-safe: stateless.
 */
final class AtenCallCodec {
    private static final int INPUT = 0;
    private static final int DEFAULT = 1;
    private static final int NONE = 2;
    private static final int LONG = 3;
    private static final int DOUBLE = 4;
    private static final int BOOL = 5;
    private static final int STRING = 6;
    private static final int DTYPE = 7;
    private static final int MEMORY_FORMAT = 8;
    private static final int LONGS = 9;
    private static final int DOUBLES = 10;
    private static final int BOOLS = 11;
    private static final int INPUT_LIST = 12;
    /** More than any ATen schema has (the longest have about 30). */
    private static final int MAX_ARGS = 256;
    /** The most tensor inputs a call may take (a {@code Tensor[]} holds many): far above any real concatenation. */
    private static final int MAX_INPUTS = 1 << 16;
    /** The longest list constant read: far above any dims or sizes list, far below what would strain a worker. */
    private static final int MAX_LIST = 1 << 16;
    private static final MemoryFormat[] MEMORY_FORMATS = {
        MemoryFormat.Contiguous, MemoryFormat.Preserve, MemoryFormat.ChannelsLast, MemoryFormat.ChannelsLast3d};

    private AtenCallCodec() {
    }

    /** Writes {@code call}; every constant is one of {@link AtenCall.Constant}'s kinds, as its constructor checked. */
    static void write(AtenCall call, WireWriter out) {
        Overload overload = call.overload();
        out.putString(overload.name()).putString(overload.overloadName()).putInt(call.args().size());
        for (AtenCall.Arg arg : call.args()) {
            switch (arg) {
                case AtenCall.Input in -> out.putByte(INPUT).putInt(in.index());
                case AtenCall.InputList in -> out.putByte(INPUT_LIST).putInt(in.first()).putInt(in.count());
                case AtenCall.Default d -> out.putByte(DEFAULT);
                case AtenCall.Constant c -> writeConstant(call, c.value(), out);
            }
        }
    }

    private static void writeConstant(AtenCall call, Object value, WireWriter out) {
        switch (value) {
            case null -> out.putByte(NONE);
            case Long l -> out.putByte(LONG).putLong(l);
            case Double d -> out.putByte(DOUBLE).putDouble(d);
            case Boolean b -> out.putByte(BOOL).putBoolean(b);
            case String s -> out.putByte(STRING).putString(s);
            case ScalarType t -> out.putByte(DTYPE).putDtype(t);
            case MemoryFormat m -> out.putByte(MEMORY_FORMAT).putByte(m.ordinal());
            case long[] l -> out.putByte(LONGS).putLongs(l);
            case double[] d -> {
                out.putByte(DOUBLES).putInt(d.length);
                for (double v : d) {
                    out.putDouble(v);
                }
            }
            case boolean[] b -> {
                out.putByte(BOOLS).putInt(b.length);
                for (boolean v : b) {
                    out.putBoolean(v);
                }
            }
            default -> throw new IllegalArgumentException(call.qualifiedName() + ": a constant of type "
                + value.getClass().getName() + " has no encoding");
        }
    }

    /**
     * Reads a call written by {@link #write}.
     *
     * @throws ProtocolException for an operator or overload this libtorch does not have (named), a kind no writer
     *                           produces, or arguments that do not fit the overload's schema
     */
    static AtenCall read(WireReader in) {
        String name = in.getString("aten operator name");
        String overloadName = in.getString("aten overload name");
        String qualified = "aten::" + name + (overloadName.isEmpty() ? "" : "." + overloadName);
        if (!AtenOps.exists(name)) {
            throw new ProtocolException(qualified + ": this process's libtorch has no operator aten::" + name);
        }
        Overload overload = AtenOps.overload(name, overloadName);
        if (overload == null) {
            throw new ProtocolException(qualified + ": aten::" + name + " has no overload '" + overloadName + "'; it has "
                + AtenOps.overloads(name).stream().map(o -> o.overloadName().isEmpty() ? "(default)" : o.overloadName()).toList());
        }
        int count = in.getCount(qualified + " argument count", MAX_ARGS);
        if (count != overload.params().size()) {
            throw new ProtocolException(qualified + " takes " + overload.params().size() + " arguments, the message has " + count);
        }
        List<AtenCall.Arg> args = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            args.add(readArg(in, qualified + " argument '" + overload.params().get(i).name() + "'"));
        }
        try {
            return new AtenCall(overload, args);
        } catch (IllegalArgumentException e) {
            throw new ProtocolException(e.getMessage(), e);
        }
    }

    private static AtenCall.Arg readArg(WireReader in, String what) {
        int kind = in.getByteIn(what + " kind", INPUT, INPUT_LIST);
        return switch (kind) {
            case INPUT -> new AtenCall.Input(in.getIntIn(what + " input index", 0, MAX_INPUTS - 1));
            case INPUT_LIST -> new AtenCall.InputList(in.getIntIn(what + " first input", 0, MAX_INPUTS),
                in.getIntIn(what + " input count", 0, MAX_INPUTS));
            case DEFAULT -> new AtenCall.Default();
            case NONE -> new AtenCall.Constant(null);
            case LONG -> new AtenCall.Constant(in.getLong(what));
            case DOUBLE -> new AtenCall.Constant(in.getDouble(what));
            case BOOL -> new AtenCall.Constant(in.getBoolean(what));
            case STRING -> new AtenCall.Constant(in.getString(what));
            case DTYPE -> new AtenCall.Constant(in.getDtype(what));
            case MEMORY_FORMAT -> new AtenCall.Constant(MEMORY_FORMATS[in.getByteIn(what, 0, MEMORY_FORMATS.length - 1)]);
            case LONGS -> {
                long[] values = in.getLongs(what);
                if (values.length > MAX_LIST) {
                    throw new ProtocolException(what + ": " + values.length + " ints, at most " + MAX_LIST);
                }
                yield new AtenCall.Constant(values);
            }
            case DOUBLES -> {
                double[] values = new double[in.getCount(what, MAX_LIST)];
                for (int k = 0; k < values.length; k++) {
                    values[k] = in.getDouble(what);
                }
                yield new AtenCall.Constant(values);
            }
            default -> {
                boolean[] values = new boolean[in.getCount(what, MAX_LIST)];
                for (int k = 0; k < values.length; k++) {
                    values[k] = in.getBoolean(what);
                }
                yield new AtenCall.Constant(values);
            }
        };
    }
}
