package org.dtorch.core.device;

import java.time.Duration;
import java.util.Objects;

/**
 * A marker in a {@link DeviceStream}: once recorded, other streams can wait for the work before it
 * (DTorch's {@code DeviceEvent}, a CUDA event on GPUs).
 *
 * <p>On CPU the work before an event has always finished when {@link #record(DeviceStream)} returns,
 * so {@link #query()} is true and the waits return at once. On CUDA it is a c10 CUDA event without
 * timing; {@link #streamWaitEvent(DeviceStream)} makes the other stream wait on the device, not the host.
 *
 * <p>Across processes: an {@link #createInterprocess interprocess} CUDA event, once recorded, gives a
 * 64-byte {@link #ipcHandle() handle}; another process of the host {@link #openIpc opens} it and makes its
 * own streams wait for the producer's work, as {@code torch.multiprocessing} does for shared CUDA tensors.
 *
 * <p>Ownership: {@link #close()} releases a CUDA event (the garbage collector does it otherwise). An
 * exported event must stay open until every process that opened it is done with it.
 *
 * <p>Not thread-safe for {@link #record(DeviceStream)}: one thread records; any thread may query or wait
 * after the recording thread has published the event.
 */
public abstract sealed class DeviceEvent implements AutoCloseable permits DeviceEvent.CpuEvent, CudaEvent {

    /** Bytes of an interprocess event handle ({@code cudaIpcEventHandle_t}). */
    public static final int IPC_HANDLE_BYTES = 64;

    DeviceEvent() {
    }

    /**
     * A new, unrecorded event for a device.
     *
     * @throws CudaUnavailableException for a CUDA device this process cannot use
     */
    public static DeviceEvent create(Device device) {
        Objects.requireNonNull(device, "device");
        return switch (device.kind()) {
            case CPU -> new CpuEvent(device);
            case CUDA -> new CudaEvent(device, false);
        };
    }

    /**
     * A new, unrecorded event that other processes of this host can wait for: {@link #record} it, then hand
     * them {@link #ipcHandle()}. CUDA only (timing off, {@code cudaEventInterprocess}).
     *
     * @throws IllegalArgumentException  for a CPU device: CPU work is complete when issued, so no event crosses
     * @throws CudaUnavailableException  for a CUDA device this process cannot use
     */
    public static DeviceEvent createInterprocess(Device device) {
        Objects.requireNonNull(device, "device");
        if (device.kind() != DeviceKind.CUDA) {
            throw new IllegalArgumentException("an interprocess event needs a CUDA device, got " + device);
        }
        return new CudaEvent(device, true);
    }

    /**
     * A new, unrecorded event with timing on, for the device time between two events of one stream
     * ({@link #elapsedNanos}). CUDA only ({@code cudaEventDefault}); the runtime's own events stay untimed, since CUDA
     * documents events without timing as the fastest in waits and queries. {@link #close()} destroys it.
     *
     * @throws IllegalArgumentException for a CPU device: CPU work has no device time apart from the host's
     * @throws CudaUnavailableException for a CUDA device this process cannot use
     */
    public static DeviceEvent createTimed(Device device) {
        Objects.requireNonNull(device, "device");
        if (device.kind() != DeviceKind.CUDA) {
            throw new IllegalArgumentException("a timed event needs a CUDA device, got " + device);
        }
        return CudaEvent.timed(device);
    }

    /**
     * Opens, in this process, the event another process {@linkplain #ipcHandle() exported} (or this one: then
     * the exporter's own event is returned, borrowed). The result is only waited for ({@link #streamWaitEvent},
     * {@link #query()}, {@link #synchronize()}); recording it fails. {@link #close()} releases this process's
     * handle, never the exporter's event, which its owner keeps open until every opener is done.
     *
     * @param device the device the event was recorded on, as this process numbers it
     * @param handle the {@value #IPC_HANDLE_BYTES} bytes of {@link #ipcHandle()}
     * @throws IllegalArgumentException if {@code device} is not CUDA or the handle has the wrong size
     * @throws CudaUnavailableException for a CUDA device this process cannot use
     * @throws IllegalStateException    if CUDA cannot open the handle (its exporter closed it, or died)
     */
    public static DeviceEvent openIpc(Device device, byte[] handle) {
        checkIpcHandle(device, handle);
        return CudaEvent.open(device, handle);
    }

    /**
     * Like {@link #openIpc(Device, byte[])}, for a handle of process {@code exporterPid} whose event stays alive
     * as long as that process does (a {@linkplain #takePooledInterprocess pooled} event): the event is opened
     * once per process and kept, and the result is a view of it whose {@link #close()} keeps it open. Opening an
     * event handle costs a driver call that a hand-off of the same event would otherwise pay every time.
     * {@link #closeOpenedIpcEvents} closes the events of exporters that exited.
     *
     * @throws IllegalArgumentException for a CPU device or a handle of the wrong size
     * @throws IllegalStateException    if CUDA cannot open the handle
     */
    public static DeviceEvent openIpcCached(Device device, byte[] handle, int exporterPid) {
        checkIpcHandle(device, handle);
        return CudaEvent.openCached(device, handle, exporterPid);
    }

    private static void checkIpcHandle(Device device, byte[] handle) {
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(handle, "handle");
        if (device.kind() != DeviceKind.CUDA) {
            throw new IllegalArgumentException("only CUDA events cross processes, got " + device);
        }
        if (handle.length != IPC_HANDLE_BYTES) {
            throw new IllegalArgumentException("an event handle has " + IPC_HANDLE_BYTES + " bytes, got " + handle.length);
        }
    }

    /**
     * Closes the events {@link #openIpcCached} kept for exporters that {@code exited} says are gone (their handles
     * cannot come again). Events that streams still wait for are released by CUDA once those waits pass.
     *
     * @return how many were closed
     */
    public static int closeOpenedIpcEvents(java.util.function.IntPredicate exited) {
        return CudaEvent.closeOpened(exited);
    }

    /**
     * An interprocess event of {@code device} for one hand-off, recorded by the caller: a free one of this
     * process's pool, or a new one. Give it back with {@link #returnPooledInterprocess} once every process that
     * waits for it is done; pooled events are never destroyed, so a consumer may keep its opened copy
     * ({@link #openIpcCached}) for the life of this process.
     */
    public static DeviceEvent takePooledInterprocess(Device device) {
        Objects.requireNonNull(device, "device");
        if (device.kind() != DeviceKind.CUDA) {
            throw new IllegalArgumentException("an interprocess event needs a CUDA device, got " + device);
        }
        return CudaEvent.takePooled(device);
    }

    /** Gives back an event of {@link #takePooledInterprocess}; the caller does not use it again. */
    public static void returnPooledInterprocess(DeviceEvent event) {
        CudaEvent.returnPooled(event);
    }

    /**
     * The {@value #IPC_HANDLE_BYTES}-byte handle that lets another process {@link #openIpc open} this event.
     *
     * @throws IllegalStateException if this event was not {@linkplain #createInterprocess created interprocess},
     *                               was opened from a handle, or has not been recorded yet
     */
    public byte[] ipcHandle() {
        throw new IllegalStateException(this + " is not an interprocess event: create it with DeviceEvent.createInterprocess");
    }

    /**
     * The device time, in nanoseconds, from this event to {@code end} ({@code cudaEventElapsedTime}, resolved to about
     * half a microsecond): both {@linkplain #createTimed timed}, recorded, and completed ({@link #query()}).
     *
     * @throws IllegalStateException if either event is not timed, not recorded or not completed
     */
    public long elapsedNanos(DeviceEvent end) {
        throw new IllegalStateException("elapsedNanos from " + this + " to " + end + ": both events must be created with "
            + "DeviceEvent.createTimed");
    }

    /** The device of this event. */
    public abstract Device device();

    /** Marks the current end of {@code stream}. */
    public abstract void record(DeviceStream stream);

    /** Makes {@code stream} wait for the recorded work before running anything issued later (StreamWaitEvent). */
    public abstract void streamWaitEvent(DeviceStream stream);

    /** True when the recorded work has finished. */
    public abstract boolean query();

    /**
     * True when this event marks some point of a stream: it was recorded, or it came from another process's
     * handle (whose exporter recorded it). Always true on CPU.
     */
    public boolean hasRecord() {
        return true;
    }

    /**
     * Blocks the calling thread until the recorded work has finished, at most
     * {@code -Ddtorch.device.syncTimeoutSeconds} (300 s).
     *
     * @throws DeviceTimeoutException when the work has not finished by then, naming the event
     */
    public void synchronize() {
        synchronize(DeviceWait.defaultTimeout());
    }

    /**
     * Blocks the calling thread until the recorded work has finished, at most {@code timeout}.
     *
     * @throws DeviceTimeoutException when the work has not finished by then, naming the event
     * @throws IllegalStateException  when the calling thread is interrupted while it waits
     */
    public abstract void synchronize(Duration timeout);

    /** Releases the native event. Idempotent. */
    @Override
    public void close() {
    }

    /** A CPU event: the recorded work is always complete. */
    static final class CpuEvent extends DeviceEvent {
        private final Device device;

        CpuEvent(Device device) {
            this.device = device;
        }

        @Override
        public Device device() {
            return device;
        }

        @Override
        public void record(DeviceStream stream) {
            Objects.requireNonNull(stream, "stream");
        }

        @Override
        public void streamWaitEvent(DeviceStream stream) {
            Objects.requireNonNull(stream, "stream");
        }

        @Override
        public boolean query() {
            return true;
        }

        @Override
        public void synchronize(Duration timeout) {
        }
    }
}
