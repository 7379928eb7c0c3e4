/**
 * The graph the client builds: {@link org.dtorch.core.graph.Operand}s (global tensors described by
 * {@link org.dtorch.core.graph.TensorMeta}: shape, dtype, mesh and placements) and
 * {@link org.dtorch.core.graph.Operator}s (an {@link org.dtorch.core.graph.OpSpec} applied to operands).
 * An {@code OpSpec} infers its outputs' metadata from its inputs' alone, on the client thread, before any
 * kernel runs, and builds a {@link org.dtorch.core.graph.DeviceKernel} per device. The
 * {@link org.dtorch.core.graph.GraphConstructor} hands operators to the runtime; the
 * {@link org.dtorch.core.graph.LogicalGraph} holds those not yet run; a
 * {@link org.dtorch.core.graph.GraphHistory} keeps those added since the last graph dump, which
 * {@link org.dtorch.core.graph.GraphDot} writes as Graphviz DOT.
 */
package org.dtorch.core.graph;
