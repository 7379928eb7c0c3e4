/**
 * Kernels of the distributed tensor layer, one call per device on that device's worker thread: moving a
 * tensor between shardings ({@link org.dtorch.core.kernel.ConvertKernel}), between one device and a mesh
 * ({@link org.dtorch.core.kernel.DistributedScatter}, {@link org.dtorch.core.kernel.DistributedGather}), and
 * into an existing tensor ({@link org.dtorch.core.kernel.CopyKernel}). Every device of the meshes involved
 * runs the same kernel with the same plan; collectives come from the
 * {@link org.dtorch.core.communication.group.ThreadGroupManager} and point-to-point moves from a
 * {@link org.dtorch.core.communication.store.TensorStore} named after the operation. Between the meshes of a declared
 * pipeline edge, {@link org.dtorch.core.kernel.ChannelTransferKernel} moves the tensor through a WorkerTensorChannel
 * instead, its ends kept per process by {@link org.dtorch.core.kernel.ChannelEnds}.
 */
package org.dtorch.core.kernel;
