/**
 * Tensor facts shared by every layer: the balanced shard split and small, pure descriptions of libtorch
 * tensors, and the budget of native memory that only the garbage collector may free
 * ({@link org.dtorch.core.tensor.NativeMemoryBudget}). Tensor math itself always comes from libtorch.
 */
package org.dtorch.core.tensor;
