package org.dtorch.core.communication.store;

import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.Work;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.store.NetworkStoreLayout.TakeRequest;

/**
 * A value one rank of a {@link NetworkTensorStore} set and has not waited for yet: the store's own reference to its
 * tensor, which set of its key it is (epoch, serial, count), the tickets it was published under, and the Gloo sends
 * started from it for the consumers that asked.
 *
 * <p>Thread-safe: guarded by its own monitor; the rank's sender serves it while the rank's callers read it.
 */
final class NetworkStoreValue {
    final String key;
    final long epoch;
    final long serial;
    final int getCount;
    /** The ticket numbers it was published under (more than {@code getCount} when consumers abandoned some). */
    final Queue<Long> tickets = new ConcurrentLinkedQueue<>();
    private final Tensor tensor;
    private final List<Work> sends = new ArrayList<>();
    private int took;
    private boolean dropped;

    /** Takes {@code tensor}, a contiguous reference of the store's own. */
    NetworkStoreValue(String key, long epoch, long serial, int getCount, Tensor tensor) {
        this.key = key;
        this.epoch = epoch;
        this.serial = serial;
        this.getCount = getCount;
        this.tensor = tensor;
    }

    /** How many consumers took it so far: asked for its bytes, or copied it on this rank. */
    synchronized int took() {
        return took;
    }

    /** {@code set for 2 consumers, 1 took it, 0 finished}, as the other backends say it. */
    synchronized String counts(long finished) {
        return "set for " + getCount + " consumer" + (getCount == 1 ? "" : "s") + ", " + took + " took it, " + finished + " finished";
    }

    /** Starts the send a consumer asked for (none for an empty value, or once dropped). */
    synchronized void serve(NetworkStoreGloo gloo, TakeRequest request) {
        if (dropped) {
            return;
        }
        took++;
        if (tensor.nbytes() > 0) {
            sends.add(gloo.send(tensor, request.consumer(), request.tag()));
        }
    }

    /** A copy for a consumer on this rank (Gloo sends to no rank itself). */
    synchronized Tensor copyForSelf() {
        if (dropped) {
            throw new IllegalStateException("the value of '" + key + "' was dropped");
        }
        took++;
        return tensor.clone();
    }

    /** Waits for the sends started, which every consumer's finish has completed already. */
    void awaitSends(NetworkStoreGloo gloo, Deadline deadline, String op) {
        List<Work> started;
        synchronized (this) {
            started = new ArrayList<>(sends);
            sends.clear();
        }
        for (Work w : started) {
            gloo.await(w, deadline, op + ": a send");
        }
    }

    /** Drops the store's reference; sends still running keep theirs until the group is destroyed. Idempotent. */
    synchronized void drop(NetworkStoreGloo gloo) {
        if (dropped) {
            return;
        }
        dropped = true;
        for (Work w : sends) {
            if (w.isCompleted()) {
                w.close();
            } else {
                gloo.linger(w);
            }
        }
        sends.clear();
        tensor.close();
    }
}
