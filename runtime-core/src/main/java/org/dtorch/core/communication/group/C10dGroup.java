package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.List;
import java.util.function.Supplier;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.ReduceOp;
import org.bytedeco.pytorch.Work;
import org.dtorch.core.communication.ReduceOpType;

/**
 * One rank's membership of a connected c10d process group ({@code ProcessGroupGloo} or {@code ProcessGroupNCCL}), and
 * the one way calls reach it: each call is issued and awaited here, refused once the group is closed, and its failure
 * translated by the group's {@link C10dErrorTranslator}. Every wait is bounded by the group's timeout, which c10d
 * enforces from the options each call copies {@link #timeoutMillis()} into.
 *
 * <p>Owns the process group, the store the ranks met through ({@link C10dRendezvous} made both) and the c10d
 * timeout value; {@link #close()} releases them in that order.
 *
 * <p>Not thread-safe: one rank's thread uses an instance.
 */
final class C10dGroup implements AutoCloseable {
    private final C10dErrorTranslator errors;
    private final int rank;
    private final int size;
    private final Duration timeout;
    /** The timeout as c10d wants it; copied into every options object, closed with the group. */
    private final Milliseconds timeoutMillis;
    /** The FileStore or the {@link org.dtorch.core.communication.store.RendezvousGroupStore} the ranks met through. */
    private final AutoCloseable store;
    private final Backend pg;
    private boolean closed;

    /** Takes ownership of {@code timeoutMillis}, {@code store} and {@code pg}. */
    C10dGroup(C10dErrorTranslator errors, int rank, int size, Duration timeout, Milliseconds timeoutMillis, AutoCloseable store,
              Backend pg) {
        this.errors = errors;
        this.rank = rank;
        this.size = size;
        this.timeout = timeout;
        this.timeoutMillis = timeoutMillis;
        this.store = store;
        this.pg = pg;
    }

    /** {@code gloo} or {@code nccl}. */
    String backendName() {
        return errors.backendName();
    }

    /** True for an NCCL group: its tensors are on CUDA devices and it runs on its own stream. */
    boolean isNccl() {
        return backendName().equals("nccl");
    }

    int rank() {
        return rank;
    }

    int size() {
        return size;
    }

    /** The deadline of every call, counted from its start. */
    Duration timeout() {
        return timeout;
    }

    /** The timeout for c10d's options objects; owned by this group. */
    Milliseconds timeoutMillis() {
        return timeoutMillis;
    }

    /** The c10d process group, for calls issued through {@link #run} or {@link #issue}. */
    Backend pg() {
        return pg;
    }

    C10dErrorTranslator errors() {
        return errors;
    }

    /** The group as errors name it. */
    String describe() {
        return errors.described();
    }

    /** Refuses {@code op} once the group is closed. */
    void ensureOpen(String op) {
        if (closed) {
            throw new IllegalStateException(op + " on " + describe() + ": the group is closed");
        }
    }

    /** Issues one c10d call and waits for it. */
    void run(String op, Supplier<Work> call) {
        long startNanos = System.nanoTime();
        try (Work work = issue(op, call, startNanos)) {
            waitAll(op, List.of(work), startNanos);
        }
    }

    /** Issues one c10d call of {@code op}, started at {@code startNanos}; the caller waits for and closes its work. */
    Work issue(String op, Supplier<Work> call, long startNanos) {
        ensureOpen(op);
        try {
            return call.get();
        } catch (RuntimeException e) {
            throw errors.translate(op, e, startNanos);
        }
    }

    /** Waits for every issued piece of work, in order; each wait is bounded by the group's timeout. */
    void waitAll(String op, List<Work> issued, long startNanos) {
        for (Work work : issued) {
            try {
                work._wait();
            } catch (RuntimeException e) {
                throw errors.translate(op, e, startNanos);
            }
        }
    }

    /** A new c10d reduce op of {@code op}; the caller closes it. */
    static ReduceOp reduceOp(ReduceOpType op) {
        ReduceOp.RedOpType type = switch (op) {
            case SUM -> ReduceOp.RedOpType.SUM;
            case AVG -> ReduceOp.RedOpType.AVG;
            case MAX -> ReduceOp.RedOpType.MAX;
            case MIN -> ReduceOp.RedOpType.MIN;
            case PRODUCT -> ReduceOp.RedOpType.PRODUCT;
        };
        return new ReduceOp(type);
    }

    /** Closes the group, then its store, then its timeout value. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (isNccl()) {
            pg.shutdown(); // NCCL wants its communicators finalized before the group is destroyed
        }
        pg.close();
        closeQuietly(store);
        timeoutMillis.close();
    }

    /** Closes {@code store} when not null; its failure is dropped, since the caller has a better error to report. */
    static void closeQuietly(AutoCloseable store) {
        if (store == null) {
            return;
        }
        try {
            store.close();
        } catch (Exception e) {
            // the caller's failure, or the group's close, is what matters
        }
    }
}
