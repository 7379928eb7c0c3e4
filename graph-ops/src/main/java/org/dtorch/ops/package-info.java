/**
 * The operators of the runtime: each an {@link org.dtorch.core.graph.OpSpec} with its parameters, its
 * metadata inference and sharding rule, and a kernel built on libtorch. Sharding rules accept only the
 * placements an operator can compute locally (or with the communication it declares) and otherwise throw
 * a {@link org.dtorch.core.graph.ShardingException} that lists the legal placements; they never insert a
 * redistribution.
 */
package org.dtorch.ops;
