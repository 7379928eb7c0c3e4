package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.global.torch.MemoryFormat;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.graph.TensorMeta;
import org.dtorch.core.runtime.process.OperatorCodec;
import org.dtorch.core.runtime.process.ProtocolException;
import org.dtorch.core.runtime.process.WireReader;
import org.dtorch.core.runtime.process.WireWriter;
import org.dtorch.ops.aten.AtenCall;
import org.dtorch.ops.aten.AtenCall.Arg;
import org.dtorch.ops.aten.AtenCall.Constant;
import org.dtorch.ops.aten.AtenCall.Default;
import org.dtorch.ops.aten.AtenCall.Input;
import org.dtorch.ops.aten.AtenOps;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link AtenCallCodec}: every kind of argument an {@link AtenCall} holds crosses the control channel exactly, the worker
 * finds the same overload by name, and what no writer produces (an unknown operator or overload, a value that does not fit
 * its parameter, a bad kind, a cut message) is a {@link ProtocolException} naming the operator.
 */
@Timeout(60)
class AtenCallCodecTest {

    private static AtenCall call(String name, String overload, Arg... args) {
        return new AtenCall(AtenOps.overload(name, overload), List.of(args));
    }

    private static Constant c(Object value) {
        return new Constant(value);
    }

    private static AtenCall roundTrip(AtenCall call) {
        WireWriter out = new WireWriter();
        AtenCallCodec.write(call, out);
        byte[] bytes = out.toByteArray();
        WireReader in = new WireReader(bytes, 0, bytes.length);
        AtenCall back = AtenCallCodec.read(in);
        in.expectEnd("aten call");
        return back;
    }

    @Test
    void shouldRoundTripEveryKindOfArgument() {
        List<AtenCall> calls = List.of(
            call("cumsum", "", new Input(0), c(1L), c(ScalarType.Double)),                 // int, dtype
            call("cumsum", "", new Input(0), c(-3L), c(null)),                              // None
            call("cumsum", "", new Input(0), c(Long.MIN_VALUE), new Default()),             // the schema's default
            call("add", "Tensor", new Input(0), new Input(1), c(2.5)),                      // Scalar as a double
            call("add", "Tensor", new Input(0), new Input(1), c(Long.MAX_VALUE)),           // Scalar as an exact long
            call("add", "Tensor", new Input(0), new Input(1), c(true)),                     // Scalar as a bool
            call("clamp", "", new Input(0), c(null), c(Double.NaN)),                        // NaN
            call("clamp", "", new Input(0), c(-0.0), c(Double.NEGATIVE_INFINITY)),          // -0.0 stays -0.0
            call("sum", "dim_IntList", new Input(0), c(new long[] {0, -1}), c(true), c(ScalarType.Float)), // int list, bool
            call("sum", "dim_IntList", new Input(0), c(new long[0]), c(false), new Default()), // empty list
            call("div", "Tensor_mode", new Input(0), new Input(1), c("floor")),             // str
            call("gelu", "", new Input(0), c("tanh")),
            call("clone", "", new Input(0), c(MemoryFormat.Contiguous)),                    // memory format
            call("clone", "", new Input(0), c(MemoryFormat.ChannelsLast3d)),
            call("upsample_nearest1d", "vec", new Input(0), c(null), c(new double[] {2.0, 0.5})), // float list
            call("native_layer_norm_backward", "", new Input(0), new Input(1), c(new long[] {4}), new Input(2), new Input(3),
                c(null), c(null), c(new boolean[] {true, false, true})));                    // bool list
        for (AtenCall call : calls) {
            AtenCall back = roundTrip(call);
            assertEquals(call, back, call.toString());
            assertEquals(call.toString(), back.toString());
            assertTrue(call.overload() == back.overload(), "the same overload, found again by name: " + call);
        }
        Object negativeZero = ((Constant) roundTrip(calls.get(7)).args().get(1)).value();
        assertEquals(Double.doubleToRawLongBits(-0.0), Double.doubleToRawLongBits((Double) negativeZero));
    }

    @Test
    void shouldRoundTripAnAtenOperatorThroughTheOperatorCodecAndReinferItsOutputs() {
        DeviceMesh mesh = DeviceMesh.initDeviceMesh(DeviceKind.CPU, new int[] {2}, List.of("x"));
        Sharding shard0 = Sharding.of(mesh, Placement.shard(0));
        List<TensorMeta> metas = List.of(new TensorMeta(new long[] {4, 6}, ScalarType.Float, shard0));
        AtenSpec spec = new AtenSpec(call("sum", "dim_IntList", new Input(0), c(new long[] {1}), c(true), new Default()));
        List<Operand> inputs = List.of(Operand.remote(10, metas.getFirst()));
        List<Operand> outputs = new ArrayList<>();
        for (TensorMeta m : spec.inferOutputs(metas)) {
            outputs.add(Operand.remote(11, m));
        }
        Operator op = Operator.remote(3, spec, inputs, outputs);
        OperatorCodec.Encoded encoded = OperatorCodec.encode(op, "unused");
        assertTrue(encoded.resources().isEmpty());
        Operator back = OperatorCodec.decode(new WireReader(encoded.bytes(), 0, encoded.bytes().length), (id, cause) -> { });
        AtenSpec decoded = assertInstanceOf(AtenSpec.class, back.spec());
        assertEquals(spec.call(), decoded.call());
        assertEquals("reduction", decoded.strategy().family());
        assertEquals(outputs.getFirst().meta(), back.outputs().getFirst().meta());
    }

    private static ProtocolException refused(WireWriter out) {
        byte[] bytes = out.toByteArray();
        return assertThrows(ProtocolException.class, () -> AtenCallCodec.read(new WireReader(bytes, 0, bytes.length)));
    }

    @Test
    void shouldRefuseUnknownOperatorsAndOverloadsNamingThem() {
        ProtocolException op = refused(new WireWriter().putString("no_such_operator").putString("").putInt(0));
        assertTrue(op.getMessage().contains("aten::no_such_operator"), op.getMessage());
        ProtocolException overload = refused(new WireWriter().putString("add").putString("NoSuchOverload").putInt(0));
        assertTrue(overload.getMessage().contains("aten::add.NoSuchOverload") && overload.getMessage().contains("Tensor"),
            overload.getMessage());
    }

    @Test
    void shouldRefuseArgumentsThatDoNotFitTheSchema() {
        // aten::cumsum(Tensor self, int dim, *, ScalarType? dtype=None): 3 arguments.
        ProtocolException count = refused(new WireWriter().putString("cumsum").putString("").putInt(2).putByte(0).putInt(0).putByte(3).putLong(1));
        assertTrue(count.getMessage().contains("aten::cumsum takes 3 arguments"), count.getMessage());
        ProtocolException misfit = refused(new WireWriter().putString("cumsum").putString("").putInt(3)
            .putByte(0).putInt(0).putByte(6).putString("one").putByte(1));
        assertTrue(misfit.getMessage().contains("aten::cumsum") && misfit.getMessage().contains("'dim'"), misfit.getMessage());
        ProtocolException noTensor = refused(new WireWriter().putString("cumsum").putString("").putInt(3)
            .putByte(3).putLong(1).putByte(3).putLong(1).putByte(1));
        assertTrue(noTensor.getMessage().contains("'self'"), noTensor.getMessage());
        ProtocolException kind = refused(new WireWriter().putString("cumsum").putString("").putInt(3).putByte(13));
        assertTrue(kind.getMessage().contains("aten::cumsum argument 'self' kind"), kind.getMessage());
        ProtocolException format = refused(new WireWriter().putString("clone").putString("").putInt(2).putByte(0).putInt(0).putByte(8).putByte(4));
        assertTrue(format.getMessage().contains("memory_format"), format.getMessage());
        refused(new WireWriter().putString("cumsum").putString("").putInt(3).putByte(0).putInt(0).putByte(3)); // cut short
    }

    @Test
    void shouldRefuseConstantsThatDoNotFitTheirParameterWhenTheCallIsMade() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> call("cumsum", "", new Input(0), c(1.5), c(null)));
        assertTrue(e.getMessage().contains("aten::cumsum: argument 'dim' of type int cannot take 1.5 (Double)"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> call("cumsum", "", new Input(0), c(null), c(null)), "dim is not optional");
        assertThrows(IllegalArgumentException.class, () -> call("clone", "", new Input(0), c("contiguous_format")));
    }
}
