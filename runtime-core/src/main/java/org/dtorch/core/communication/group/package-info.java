/**
 * Collectives over a group of devices (docs/communication-core.md, "ThreadGroup" and "Collective speed").
 *
 * <p>{@link org.dtorch.core.communication.group.ThreadGroup} is the API kernels call: all-reduce,
 * all-gather (even and uneven), reduce-scatter, all-to-all and the local replicate-to-shard slice. It
 * validates every input before the first byte moves and hands the work to a
 * {@link org.dtorch.core.communication.group.CollectiveBackend}: c10d {@code ProcessGroupGloo} for distinct
 * CPU devices, or the same-device backend (built on
 * {@link org.dtorch.core.communication.store.TensorStore}) when several ranks share one device.
 * {@link org.dtorch.core.communication.group.ThreadGroupManager} creates and caches groups per
 * {@link org.dtorch.core.communication.group.ThreadGroupKey} and destroys them in sorted-key order.
 *
 * <p>Uneven shards follow {@link org.dtorch.core.tensor.BalancedSplit}.
 *
 * <p>{@link org.dtorch.core.communication.group.UlyssesComm} builds Ulysses sequence parallelism's all-to-alls on a
 * group; {@link org.dtorch.core.communication.group.RingP2PComm} rotates ring attention's K/V blocks between
 * neighbours and {@link org.dtorch.core.communication.group.RingAttention} merges their attention by log-sum-exp;
 * {@link org.dtorch.core.communication.group.HaloExchange} the neighbour halos of height-sharded tensors and
 * {@link org.dtorch.core.communication.group.PipelineP2PComm} the transfers between pipeline stages build on its
 * point-to-point calls.
 */
package org.dtorch.core.communication.group;
