/**
 * What the Python {@code torch} package talks to: libtorch's operators by name through the ATen dispatcher.
 * {@link org.dtorch.polyglot.torch.TorchModule} (the polyglot binding {@code dtorch.torch}) finds the overloads of
 * {@code aten::<name>}; an {@link org.dtorch.polyglot.torch.AtenOperator} resolves the kinds of a call's arguments to
 * one overload once (a {@link org.dtorch.polyglot.torch.BoundCall}) and caches it; the call runs through
 * {@code OperatorHandle.callBoxed}; tensors stay in the JVM behind {@link org.dtorch.polyglot.torch.PyTensor} handles.
 * See docs/torch-module.md.
 */
package org.dtorch.polyglot.torch;
