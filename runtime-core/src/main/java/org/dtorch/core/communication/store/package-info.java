/**
 * TensorStore: producer-consumer exchange of tensors by key between the ranks of one operation
 * (docs/communication-core.md, TensorStore).
 *
 * <p>Every exchange is a four-step handshake:
 * <pre>
 *   Producer (1 writer)                         Consumers (N = getCount readers)
 *   1. srcSet(key, tensor, getCount = N)        3. destGet(key)        blocks until step 1
 *   2. srcWaitUntilGetFinished(key)             4. destFinishGet(key)  counts one finished reader
 *      blocks until all N did step 4
 * </pre>
 * {@link org.dtorch.core.communication.store.TensorStore#createForParticipants} picks the backend:
 * {@link org.dtorch.core.communication.store.MemoryTensorStore} for ranks in one process,
 * {@link org.dtorch.core.communication.store.FileTensorStore} for processes of one host, and
 * {@link org.dtorch.core.communication.store.NetworkTensorStore} for ranks on several hosts, which meet at a
 * {@link org.dtorch.core.communication.store.RendezvousAddress}.
 */
package org.dtorch.core.communication.store;
