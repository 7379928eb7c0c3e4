/**
 * Distributed tensors: device meshes, placements, the layout of shards, and the redistribution planner.
 *
 * <p>A tensor of a global shape lives on a {@link org.dtorch.core.distributed.DeviceMesh} with one
 * {@link org.dtorch.core.distributed.Placement} per mesh dimension (together a
 * {@link org.dtorch.core.distributed.Sharding}): {@code S(d)} splits tensor dimension {@code d} over that
 * mesh dimension with the balanced split, {@code R} replicates, {@code P(op)} holds partial values to be
 * reduced with {@code op}. {@link org.dtorch.core.distributed.ShardLayout} says which slice every device
 * holds; {@link org.dtorch.core.distributed.RedistributionPlanner} turns a change of sharding into steps
 * that the kernels execute.
 */
package org.dtorch.core.distributed;
