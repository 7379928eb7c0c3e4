package org.dtorch.core.testing;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;

/**
 * A body running on a platform thread of its own, with a name the test chooses, and its result: a test that waits until
 * that thread blocks ({@link Await#asleep}) needs to know the thread, which {@link CompletableFuture#supplyAsync} hides.
 *
 * @param thread the thread that runs the body
 * @param result completes with the body's value, or exceptionally with what it threw
 * @param <T> the body's value
 *
 * <p>Thread-safe: the thread and the future may be read from any thread.
 */
public record OnThread<T>(Thread thread, CompletableFuture<T> result) {

    /** Starts {@code body} on a new platform thread named {@code name}. */
    public static <T> OnThread<T> start(String name, Callable<T> body) {
        CompletableFuture<T> result = new CompletableFuture<>();
        Thread thread = Thread.ofPlatform().name(name).start(() -> {
            try {
                result.complete(body.call());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        });
        return new OnThread<>(thread, result);
    }
}
