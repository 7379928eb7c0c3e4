/**
 * Shared memory between processes of one host: named regions mapped from files under
 * {@code /dev/shm} (owner-only), atomic access to them, and a futex through the FFM API so that a waiter
 * truly sleeps and is woken by a write in another process. {@link org.dtorch.core.shm.OwnedPaths} holds the
 * rules that keep other users of the host out: directories checked, regions opened without following links
 * and checked with {@code fstat} before they are mapped, and a janitor that removes only this user's files of
 * processes that have verifiably exited.
 *
 * <p>CUDA memory crosses processes through CUDA IPC instead of files: {@link org.dtorch.core.shm.CudaIpcTensors}
 * lends a CUDA tensor (an allocation handle, an offset and an interprocess event, described by a
 * {@link org.dtorch.core.shm.CudaIpcDescriptor} that the File store and File promises embed) and views what
 * another process lent.
 */
package org.dtorch.core.shm;
