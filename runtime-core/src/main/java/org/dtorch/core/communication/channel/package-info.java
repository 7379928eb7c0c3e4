/**
 * The {@link org.dtorch.core.communication.channel.WorkerTensorChannel}: tensors handed from one producer group of
 * workers to one consumer group on the same host, with only a small
 * {@link org.dtorch.core.communication.channel.WorkerTensorRef} passing through the control path and the bytes in
 * persistent shared memory (docs/communication-core.md, WorkerTensorChannel).
 */
package org.dtorch.core.communication.channel;
