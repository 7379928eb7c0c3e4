/**
 * The Java graph construction API: {@link org.dtorch.api.DTorch} starts a runtime and makes tensors,
 * {@link org.dtorch.api.DTensor} is a global tensor on a device mesh with the operators as methods.
 * Every call returns at once; values come back through futures ({@link org.dtorch.api.DTensor#toTorchAsync()}).
 *
 * <pre>{@code
 * try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).build())) {
 *     DeviceMesh mesh = dt.defaultMesh();
 *     DTensor x = dt.randn(7, new long[] {8, 16}, mesh, Placement.shard(0));
 *     DTensor y = x.mul(2.0).relu().sum(1);
 *     Tensor result = y.toTorch();   // blocks until the workers have run it
 * }
 * }</pre>
 */
package org.dtorch.api;
