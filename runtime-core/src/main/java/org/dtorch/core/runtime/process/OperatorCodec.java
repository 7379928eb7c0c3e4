package org.dtorch.core.runtime.process;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;

/**
 * The encoding of an {@link Operator} on the control channel.
 *
 * <pre>
 *   operator := id:long  tag:string  spec-parameters  inputs:(count:int, operand...)  outputs:(count:int, operand...)
 *   operand  := id:long  meta     (see {@link MetaCodec})
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
public final class OperatorCodec {
    private static final int MAX_OPERANDS = 4096;

    private OperatorCodec() {
    }

    /** An operator's bytes and the shared memory they refer to (close it once every device ran the operator). */
    public record Encoded(byte[] bytes, List<AutoCloseable> resources) {
        /** Closes the resources; errors are ignored (the memory is gone either way once its users unmap it). */
        public void release() {
            for (AutoCloseable r : resources) {
                try {
                    r.close();
                } catch (Exception ignored) {
                    // best effort
                }
            }
        }
    }

    /**
     * Encodes {@code op}. Large tensors among its parameters go into shared memory named from
     * {@code sharedPrefix}, or inline when it is null (workers on other hosts).
     *
     * @throws IllegalArgumentException if the operator's spec has no codec
     */
    public static Encoded encode(Operator op, String sharedPrefix) {
        OpSpec spec = op.spec();
        OpSpecCodec<OpSpec> codec = OpSpecCodecs.require(spec);
        WireWriter out = new WireWriter();
        out.putLong(op.id());
        out.putString(codec.tag());
        try {
            codec.write(spec, new SpecWriter(out, sharedPrefix == null ? null : sharedPrefix + "-op" + op.id()));
        } catch (RuntimeException e) {
            new Encoded(null, out.resources()).release();
            throw e;
        }
        writeOperands(out, op.inputs());
        writeOperands(out, op.outputs());
        return new Encoded(out.toByteArray(), out.resources());
    }

    private static void writeOperands(WireWriter out, List<Operand> operands) {
        out.putInt(operands.size());
        for (Operand o : operands) {
            out.putLong(o.id());
            MetaCodec.writeMeta(out, o.meta());
        }
    }

    /**
     * Decodes an operator; a spec's promise errors go to {@code failureSink} with the operator's id.
     *
     * @throws ProtocolException if the bytes are not exactly one valid operator
     */
    public static Operator decode(WireReader in, FailureSink failureSink) {
        long id = in.getLong("operator id");
        String tag = in.getString("operator tag");
        OpSpecCodec<?> codec = OpSpecCodecs.byTag(tag);
        OpSpec spec;
        try {
            spec = codec.read(new SpecReader(in, cause -> failureSink.failed(id, cause)));
        } catch (ProtocolException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new ProtocolException("operator " + id + " (" + tag + "): its parameters are invalid: " + e.getMessage(), e);
        }
        List<Operand> inputs = readOperands(in, "input");
        List<Operand> outputs = readOperands(in, "output");
        in.expectEnd("operator " + id + " (" + tag + ")");
        try {
            List<org.dtorch.core.graph.TensorMeta> metas = inputs.stream().map(Operand::meta).toList();
            List<org.dtorch.core.graph.TensorMeta> inferred = spec.inferOutputs(metas);
            if (!inferred.equals(outputs.stream().map(Operand::meta).toList())) {
                throw new ProtocolException("operator " + id + " (" + tag + "): its outputs " + outputs + " are not what the spec infers: "
                    + inferred);
            }
            return Operator.remote(id, spec, inputs, outputs);
        } catch (ProtocolException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new ProtocolException("operator " + id + " (" + tag + ") is inconsistent: " + e.getMessage(), e);
        }
    }

    private static List<Operand> readOperands(WireReader in, String what) {
        int n = in.getCount(what, MAX_OPERANDS);
        List<Operand> operands = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            long id = in.getLong(what);
            try {
                operands.add(Operand.remote(id, MetaCodec.readMeta(in, what)));
            } catch (ProtocolException e) {
                throw new ProtocolException(what + " %" + id + ": " + e.getMessage(), e);
            }
        }
        return operands;
    }

    /** Where a decoded operator's promise errors go. */
    @FunctionalInterface
    public interface FailureSink {
        /** Operator {@code operatorId} failed with {@code cause}. */
        void failed(long operatorId, Throwable cause);
    }
}
