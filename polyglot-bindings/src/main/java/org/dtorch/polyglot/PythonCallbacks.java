package org.dtorch.polyglot;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The threads that run one bridge's Python callbacks ({@code add_done_callback}, the wake-up of an {@code await}):
 * never a device's worker or the runtime's File-future watcher, which complete the futures, and never a thread
 * shared with another Python context. A GraalPy context remembers every thread that entered it; a pooled thread
 * that entered one context and later another left the second one's GIL hand-over stuck (a Python thread spinning
 * on the GIL starved the main thread for good), so these threads end with the bridge's host.
 *
 * <p>Up to {@value #THREADS} threads, started on demand; callbacks beyond that queue. A callback that blocks (on
 * another future, say) releases the GIL while it waits in Java and holds one thread until it returns.
 *
 * <p>Thread-safe: any completing thread may submit; {@link #close()} from the host's owner.
 */
final class PythonCallbacks implements AutoCloseable {
    static final int THREADS = 4;
    private static final AtomicInteger NUMBER = new AtomicInteger();
    /** Null until the first callback, and again after {@link #close()}. Guarded by this. */
    private ThreadPoolExecutor pool;

    /** Runs {@code callback} on one of these threads; dropped if the host is closed already (nobody to call). */
    void execute(Runnable callback) {
        ThreadPoolExecutor current;
        synchronized (this) {
            if (pool == null) {
                pool = new ThreadPoolExecutor(THREADS, THREADS, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                    r -> Thread.ofPlatform().daemon().name("dtorch-python-callbacks-" + NUMBER.incrementAndGet()).unstarted(r));
                pool.allowCoreThreadTimeOut(true);
            }
            current = pool;
        }
        try {
            current.execute(callback);
        } catch (RejectedExecutionException closed) {
            // the host closed between the check and the submission: its context is gone, there is nobody to call
        }
    }

    /** Stops the threads (after the host's context is closed); a later callback starts new ones. */
    @Override
    public void close() {
        ThreadPoolExecutor current;
        synchronized (this) {
            current = pool;
            pool = null;
        }
        if (current != null) {
            current.shutdownNow();
            try {
                current.awaitTermination(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
