/**
 * Promises and futures: how a worker hands a value (or just "done") to the client
 * (docs/communication-core.md, Promises and futures).
 *
 * <p>The client creates a promise ({@link org.dtorch.core.communication.promise.TensorPromises}), keeps its
 * future, and sends the promise with the operator that will produce the value; the worker calls
 * {@code setValue} or {@code setException}. Completion is pushed: {@code get()} wakes without polling,
 * and {@code toCompletableFuture()} runs callbacks on completion, which the Python {@code await} builds on.
 */
package org.dtorch.core.communication.promise;
