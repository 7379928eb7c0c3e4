package org.dtorch.core.communication.group;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.store.TensorStore;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Point-to-point transfers of the same-device backend, through its {@link TensorStore}: a send publishes the tensor
 * itself for one consumer under {@code p2p/<src>/<dst>/<n>}, where {@code n} counts the transfers from {@code src} to
 * {@code dst}, so the ranks' calls match in the order they are made; the receiver takes it, copies it into its own
 * tensor and finishes the take, which frees the sender. No byte is copied but the receiver's one copy.
 *
 * <p>The receiver sees the sent tensor, so it checks dtype and shape before copying; on a mismatch it still takes every
 * transfer of its batch (so the senders are released) and then fails with both descriptions.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class SameDeviceP2P {
    private final TensorStore store;
    private final String groupName;
    private final int rank;
    /** Transfers issued so far, per peer: sends to it, receives from it. */
    private final long[] sent;
    private final long[] received;

    SameDeviceP2P(TensorStore store, String groupName) {
        this.store = store;
        this.groupName = groupName;
        this.rank = store.rank();
        this.sent = new long[store.worldSize()];
        this.received = new long[store.worldSize()];
    }

    /** Publishes every send now; the returned action takes every receive in order, then waits until the sends were taken. */
    Runnable batch(List<P2POp> ops, DeviceStream stream) {
        List<String> sends = new ArrayList<>();
        List<String> recvKeys = new ArrayList<>();
        List<P2POp> recvs = new ArrayList<>();
        for (P2POp op : ops) {
            if (op.kind() == P2POp.Kind.ISEND) {
                String key = key(rank, op.peer(), sent[op.peer()]++);
                store.srcSet(key, op.tensor(), stream, 1);
                sends.add(key);
            } else {
                recvKeys.add(key(op.peer(), rank, received[op.peer()]++));
                recvs.add(op);
            }
        }
        return () -> {
            IllegalArgumentException mismatch = null;
            for (int i = 0; i < recvs.size(); i++) {
                IllegalArgumentException failed = take(recvKeys.get(i), recvs.get(i), stream);
                mismatch = mismatch == null ? failed : mismatch;
            }
            for (String key : sends) {
                store.srcWaitUntilGetFinished(key, stream);
            }
            if (mismatch != null) {
                throw mismatch;
            }
        };
    }

    /** Takes one transfer into {@code op}'s tensor; a dtype or shape mismatch is returned, not thrown, once the take is finished. */
    private IllegalArgumentException take(String key, P2POp op, DeviceStream stream) {
        Tensor into = op.tensor();
        Tensor sent = store.destGet(key, stream);
        try {
            if (TorchTensors.dtype(sent) != TorchTensors.dtype(into)
                || !Arrays.equals(TorchTensors.shape(sent), TorchTensors.shape(into))) {
                return new IllegalArgumentException("recv on group " + groupName + " (rank " + rank + ", same-device): rank "
                    + op.peer() + " sent " + TorchTensors.describe(sent) + " but rank " + rank + " receives into "
                    + TorchTensors.describe(into));
            }
            into.copy_(sent);
            return null;
        } finally {
            sent.close();
            store.destFinishGet(key, stream);
        }
    }

    private static String key(int src, int dst, long n) {
        return "p2p/" + src + "/" + dst + "/" + n;
    }
}
