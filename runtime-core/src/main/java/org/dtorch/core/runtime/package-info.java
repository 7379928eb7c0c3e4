/**
 * The eager runtime: client, controller, device nodes (docs/graph-runtime.md; the architecture's data flow).
 *
 * <pre>
 *  client thread            dispatch                        one node per device, started by the DeviceFleet
 *  GraphConstructor  --->   EagerGraphExecutor       --->   DeviceLoop (a thread of this JVM, or a worker JVM)
 *  (infer, enqueue)         (graph, topological order,      -> NaiveRunner: operator -> kernel,
 *                            dispatch to every device)         blob table, KernelStream
 * </pre>
 *
 * The dispatch runs on the client's thread when submitting to the nodes never blocks (threads), and on a controller
 * thread of its own when it may (worker processes): {@link org.dtorch.core.runtime.DeviceFleet#submitMayBlock()}.
 *
 * The client never waits for a kernel: values come back through futures
 * ({@link org.dtorch.core.runtime.PromiseSpec}). {@link org.dtorch.core.runtime.EagerRuntime} assembles the pieces
 * and shuts them down; a {@link org.dtorch.core.runtime.DeviceFleet} says how the device nodes run
 * ({@link org.dtorch.core.runtime.ThreadFleet} here, {@link org.dtorch.core.runtime.process.ProcessFleet} in
 * {@code process}; docs/graph-runtime.md, Fleets, and docs/process-mode.md), so the runtime and the controller
 * never ask which.
 */
package org.dtorch.core.runtime;
