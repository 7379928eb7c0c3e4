package org.dtorch.core.communication.group;

import org.bytedeco.pytorch.Tensor;

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
}
