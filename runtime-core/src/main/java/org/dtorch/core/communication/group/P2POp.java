package org.dtorch.core.communication.group;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.tensor.TorchTensors;

/**
 * One operation of {@link ThreadGroup#batchIsendIrecv}: send {@code tensor} to, or receive into it from, the
 * group-local rank {@code peer} (c10d's {@code P2POp}). The tensor is the caller's: a sent tensor must not change, and a
 * received one must not be read, until the batch's {@link P2PWork} has been awaited.
 *
 * <p>Thread-safe: an immutable value (the tensor it names is not).
 *
 * @param kind   send or receive
 * @param tensor what is sent, or where the received values go
 * @param peer   the other rank, group-local
 */
public record P2POp(Kind kind, Tensor tensor, int peer) {

    /** The direction of a {@link P2POp}. */
    public enum Kind {
        /** This rank sends to {@code peer}. */
        ISEND,
        /** This rank receives from {@code peer}. */
        IRECV
    }

    /** Sends {@code tensor} to the group-local rank {@code dstRank}. */
    public static P2POp isend(Tensor tensor, int dstRank) {
        return new P2POp(Kind.ISEND, tensor, dstRank);
    }

    /** Receives into {@code into} from the group-local rank {@code srcRank}. */
    public static P2POp irecv(Tensor into, int srcRank) {
        return new P2POp(Kind.IRECV, into, srcRank);
    }

    /**
     * The call for messages: {@code send(float32[4] on cpu to rank 1)} for one blocking operation,
     * {@code batchIsendIrecv(isend ... to rank 1, irecv into ... from rank 0)} for a batch.
     */
    static String describe(String call, List<P2POp> ops) {
        boolean batch = call.equals("batchIsendIrecv");
        StringBuilder out = new StringBuilder(call).append('(');
        for (P2POp op : ops) {
            boolean sending = op.kind() == Kind.ISEND;
            out.append(out.charAt(out.length() - 1) == '(' ? "" : ", ").append(batch ? (sending ? "isend " : "irecv ") : "")
                .append(sending ? "" : "into ").append(TorchTensors.describe(op.tensor()))
                .append(sending ? " to rank " : " from rank ").append(op.peer());
        }
        return out.append(')').toString();
    }
}
