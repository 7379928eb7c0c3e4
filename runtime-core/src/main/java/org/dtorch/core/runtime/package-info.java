/**
 * The eager runtime: client, controller, workers (seed section 4 and the architecture's data flow).
 *
 * <pre>
 *  client thread            controller thread               one worker thread per device
 *  GraphConstructor  --->   EagerGraphExecutor       --->   PerDeviceThreadNodeRunner
 *  (infer, enqueue)         (graph, topological order,      -> NaiveRunner: operator -> kernel,
 *                            dispatch to every device)         blob table, KernelStream
 * </pre>
 *
 * The client never waits for a kernel: values come back through futures
 * ({@link org.dtorch.core.runtime.GetTensorSpec}, {@link org.dtorch.core.runtime.SyncSpec}).
 * {@link org.dtorch.core.runtime.EagerRuntime} assembles the pieces and shuts them down.
 */
package org.dtorch.core.runtime;
