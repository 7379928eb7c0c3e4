/**
 * Per-device-process mode: the {@link org.dtorch.core.runtime.process.ProcessFleet} and everything only it uses
 * (docs/process-mode.md). The controller side starts the workers ({@code WorkerPool}), holds one handle per worker
 * ({@code WorkerProcess}), encodes operators once for all of them ({@code OperatorEncoder}, {@link
 * org.dtorch.core.runtime.process.OperatorCodec}) and shares a failure board with them ({@code SharedFailureBoard},
 * laid out by {@code FailureBoardDescriptor}); the worker side is {@link org.dtorch.core.runtime.process.WorkerMain},
 * which runs the same {@link org.dtorch.core.runtime.DeviceLoop} as a thread of thread mode. Between the two: the
 * control channel ({@link org.dtorch.core.runtime.process.ControlChannel}) and its strict wire format
 * ({@link org.dtorch.core.runtime.process.WireReader}, {@link org.dtorch.core.runtime.process.WireWriter}). Across hosts
 * ({@code NodeLaunch} on the controller's node, a {@code NodeAgent} on each other one, docs/multi-host.md), a control
 * connection over TCP opens with {@link org.dtorch.core.runtime.process.ControlHandshake} on the run's
 * {@link org.dtorch.core.runtime.process.ClusterToken}, accepted by a
 * {@link org.dtorch.core.runtime.process.ControlListener}.
 */
package org.dtorch.core.runtime.process;
