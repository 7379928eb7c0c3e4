package org.dtorch.core.communication.store;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.CudaIpcTensors;

/**
 * The CUDA IPC side of one {@link FileTensorStore} instance (docs/gpu.md, CUDA IPC): the values this rank lent,
 * kept until their consumers finished, and the values it took, whose producer events it keeps open until it
 * finishes them. The store's entry protocol (counts, liveness, the control region) stays in the store.
 *
 * <p>Ordering of a hand-off: the producer's interprocess event is recorded on its stream when it lends; a taker's
 * stream waits for it on the device (a CPU stream: the host waits); a taker's finish waits on the host until its
 * stream has passed the work issued so far, so once the producer counted every finish no GPU work of a consumer
 * reads the memory and the loan can end at once.
 *
 * <p>Thread-safe: guarded by this instance; {@link #hasTakes()} reads without the lock.
 */
final class FileStoreCudaExchanges {

    /** A host wait for an event that fails on the store's deadline, an interrupt, or a dead participant. */
    interface HostWait {
        void await(String op, DeviceEvent event, Deadline deadline, Supplier<String> seen);
    }

    /** A taken value not finished yet: its device, and the producer's event opened here (null when empty). */
    private record Take(Device device, DeviceEvent written) {
        void close() {
            if (written != null) {
                written.close();
            }
        }
    }

    private final Map<String, CudaIpcTensors.Loan> lent = new HashMap<>();
    private final Map<String, ArrayDeque<Take>> taken = new HashMap<>();
    /** How many takes {@link #taken} holds; read without the lock, so that a CPU value's finish skips the map. */
    private volatile int takeCount;
    private boolean tookAny;

    /** Keeps the loan of {@code key}, which just went live, until {@link #endLoan}. */
    synchronized void lent(String key, CudaIpcTensors.Loan loan) {
        lent.put(key, loan);
    }

    /** The loan of {@code key}, no longer kept (every consumer finished); null for a key that lent nothing. */
    synchronized CudaIpcTensors.Loan endLoan(String key) {
        return lent.isEmpty() ? null : lent.remove(key);
    }

    /**
     * Takes a lent value: views its allocation (opened once per process) and orders {@code stream} after the
     * producer's writes, on the device for a CUDA stream, on the host for a CPU stream. The producer's event is
     * kept until {@link #finish}. On failure nothing is kept.
     */
    Tensor take(String op, String key, CudaIpcDescriptor lentValue, long[] shape, ScalarType dtype, DeviceStream stream, Deadline deadline,
                HostWait hostWait) {
        Device device = Device.cuda(lentValue.device());
        DeviceEvent written = null;
        Tensor view = null;
        try {
            view = CudaIpcTensors.view(lentValue, shape, dtype, null);
            if (!lentValue.isEmpty()) {
                written = DeviceEvent.openIpcCached(device, lentValue.eventHandle(), lentValue.producerPid());
                if (stream.device().kind() == DeviceKind.CUDA) {
                    // Usually the producer's writes are long done: then the consumer's stream need not wait on the
                    // other process's event, a dependency between two CUDA contexts that costs a context switch.
                    if (!written.query()) {
                        written.streamWaitEvent(stream);
                    }
                } else {
                    hostWait.await(op, written, deadline, () -> "the producer's GPU work that writes the value has not finished");
                }
            }
        } catch (RuntimeException e) {
            if (written != null) {
                written.close();
            }
            if (view != null) {
                view.close();
            }
            throw e;
        }
        synchronized (this) {
            taken.computeIfAbsent(key, k -> new ArrayDeque<>()).addLast(new Take(device, written));
            takeCount++;
            tookAny = true;
        }
        return view;
    }

    /** True while a take of this instance is not finished. */
    boolean hasTakes() {
        return takeCount > 0;
    }

    /**
     * Finishes the oldest take of {@code key}, if there is one (a CPU value has none): waits on the host until the
     * work {@code stream} had been given has run, since it is what read the lent memory.
     */
    void finish(String op, String key, DeviceStream stream, Duration timeout, HostWait hostWait) {
        Take take;
        synchronized (this) {
            ArrayDeque<Take> takes = taken.get(key);
            take = takes == null ? null : takes.pollFirst();
            if (take == null) {
                return;
            }
            if (takes.isEmpty()) {
                taken.remove(key);
            }
            takeCount--;
        }
        try {
            DeviceStream reader = stream.device().kind() == DeviceKind.CUDA ? stream : DeviceStream.of(take.device());
            try (DeviceEvent read = reader.recordEvent()) {
                hostWait.await(op, read, Deadline.after(timeout), () -> "the consumer's stream " + reader
                    + " has not finished its work on the value (it waits for the producer's writes first)");
            }
        } finally {
            take.close();
        }
    }

    /**
     * Drops every loan and take, on reset and close. As with a CPU value's data region, which its producer may
     * then reuse, a consumer must not use a value past a reset.
     */
    synchronized void drop() {
        lent.values().forEach(CudaIpcTensors.Loan::close);
        lent.clear();
        taken.values().forEach(takes -> takes.forEach(Take::close));
        taken.clear();
        takeCount = 0;
    }

    /** True once this instance took a CUDA value. */
    synchronized boolean tookAny() {
        return tookAny;
    }
}
