package org.dtorch.core.communication.promise;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Where the callbacks of futures run: on a small pool of daemon threads of their own, never on the thread
 * that completed the promise. That thread is a device worker or the process-wide {@link FileFutureWatcher};
 * a user callback that blocks there (on another value, say) would stall every device behind it.
 *
 * <p>The pool has {@value #THREADS} threads, started on demand and ended after {@value #KEEP_ALIVE_SECONDS} s
 * idle; callbacks beyond that queue. A callback that blocks takes one thread until it returns: callbacks
 * that wait on each other's results can exhaust the pool.
 *
 * <p>Thread-safe: stateless but for the shared pool.
 */
final class FutureCallbacks {
    static final int THREADS = 4;
    static final long KEEP_ALIVE_SECONDS = 30;
    private static final AtomicInteger NUMBER = new AtomicInteger();
    private static final ThreadPoolExecutor POOL = pool();

    private FutureCallbacks() {
    }

    private static ThreadPoolExecutor pool() {
        ThreadPoolExecutor pool = new ThreadPoolExecutor(THREADS, THREADS, KEEP_ALIVE_SECONDS, TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(), r -> Thread.ofPlatform().daemon().name("dtorch-callbacks-" + NUMBER.incrementAndGet()).unstarted(r));
        pool.allowCoreThreadTimeOut(true);
        return pool;
    }

    /**
     * A new future completed like {@code raw}, but from a callback thread: stages the caller attaches to it
     * run there (or on the caller's thread, if it attaches after completion), never on {@code raw}'s completer.
     * Completing the returned future does not affect {@code raw}.
     */
    static <T> CompletableFuture<T> offCompleter(CompletableFuture<T> raw) {
        CompletableFuture<T> view = new CompletableFuture<>();
        raw.whenComplete((value, error) -> POOL.execute(() -> {
            if (error == null) {
                view.complete(value);
            } else {
                view.completeExceptionally(error instanceof CompletionException && error.getCause() != null ? error.getCause() : error);
            }
        }));
        return view;
    }
}
