/**
 * Tensor facts shared by every layer: the balanced shard split and small, pure descriptions of libtorch
 * tensors. Tensor math itself always comes from libtorch.
 */
package org.dtorch.core.tensor;
