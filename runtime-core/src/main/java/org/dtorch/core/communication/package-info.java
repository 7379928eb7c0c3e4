/**
 * The communication core: how tensors move between the ranks of a computation.
 *
 * <p>Three mechanisms, from low to high level (docs/communication-core.md, Three layers):
 * <ul>
 *   <li>{@link org.dtorch.core.communication.store.TensorStore}: point-to-point, key-value exchange of
 *       tensors between threads (and, later, processes and hosts) with a four-step handshake;</li>
 *   <li>{@link org.dtorch.core.communication.promise.TensorPromise} /
 *       {@link org.dtorch.core.communication.promise.TensorFuture}: a worker hands one value to the client;</li>
 *   <li>{@link org.dtorch.core.communication.group.ThreadGroup}: collectives (all-reduce, all-gather,
 *       reduce-scatter, all-to-all) over a group of devices, on c10d Gloo or on the same-device backend.</li>
 * </ul>
 * Every blocking call has a deadline ({@link org.dtorch.core.communication.CommOptions#timeout()} by
 * default) and fails with a {@link org.dtorch.core.communication.CommTimeoutException} that names what it
 * waited for.
 */
package org.dtorch.core.communication;
