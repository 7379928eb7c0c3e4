package org.dtorch.core.communication.promise;

import static org.dtorch.core.communication.promise.FilePromiseLayout.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.shm.CudaIpcDescriptor;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.shm.Futex;
import org.dtorch.core.shm.Processes;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * One File promise's shared memory ({@link FilePromiseLayout}), seen from one process: completing it with
 * a value or an error, waiting for it, and reading the outcome. A tensor value is copied once, into the
 * region itself when small or into a region of its own ({@code <name>-v}) when large, which the reader
 * maps, views without copying and unlinks.
 *
 * <p>A CUDA value is not copied: the completer lends it through CUDA IPC ({@link CudaIpcTensors}), keeps its
 * reference, and takes it back once the future's process sets {@code released} (its last view of the value is
 * gone, or it dropped the future unread) or exits; the future's process rings the completer's doorbell when it
 * releases, and the completer's {@link FileFutureWatcher} checks every few hundred milliseconds anyway. The reader
 * waits on the host for the completer's writes (a future has no stream), polling, so that a completer that dies
 * meanwhile fails the read instead of hanging it.
 *
 * <p>Lifetime: the creating process names the region {@code dtorch-<instance>-pr-<n>}; the future's side
 * unlinks it (and the value region) once it has read the outcome, or when it is dropped unread
 * ({@link #abandon()}). Each holder keeps one reference to the mapping and {@link #release()}s it.
 *
 * <p>Thread-safe: completion is a compare-and-set on the state word; reading is idempotent.
 */
final class FilePromiseRegion {
    private static final AtomicLong COUNTER = new AtomicLong();
    /** Regions created here whose future has not removed them yet; removed at exit too. */
    private static final java.util.Set<String> OWNED = java.util.concurrent.ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> OWNED.forEach(name -> {
            SharedRegion.unlink(name);
            SharedRegion.unlink(name + "-v");
        }), "dtorch-promise-cleanup"));
    }

    private static final long SLEEP_SLICE_NANOS = 100_000_000L;
    /** How often a reader waiting for a lender's GPU work polls its event, and checks that the lender lives. */
    private static final long EVENT_POLL_NANOS = 20_000L;
    private static final long LENDER_CHECK_NANOS = 250_000_000L;

    private final SharedRegion region;
    private final MemorySegment seg;
    /**
     * The error object, when the promise was failed in this process: a future here then rethrows it as it
     * is, not as text. Shared by the promise and its future.
     */
    private final java.util.concurrent.atomic.AtomicReference<Throwable> localError;
    /** The future process's doorbell, read once. */
    private final String doorbell;
    /** True once this holder handed out a view of a lent CUDA value: its release, not {@link #abandon()}, frees it. */
    private volatile boolean viewed;

    private FilePromiseRegion(SharedRegion region) {
        this(region, new java.util.concurrent.atomic.AtomicReference<>());
    }

    private FilePromiseRegion(SharedRegion region, java.util.concurrent.atomic.AtomicReference<Throwable> localError) {
        this.region = region;
        this.seg = region.segment();
        this.localError = localError;
        this.doorbell = Shm.getString(seg, DOORBELL);
    }

    /** A new region for a promise of {@code kind}, in the PENDING state. */
    static FilePromiseRegion create(int kind) {
        while (true) {
            String name = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-pr-" + COUNTER.incrementAndGet();
            SharedRegion region = SharedRegion.create(name, REGION_SIZE).orElse(null);
            if (region == null) {
                continue; // left by an earlier process with our prefix: take the next number
            }
            MemorySegment s = region.segment();
            s.set(ValueLayout.JAVA_INT, KIND, kind);
            s.set(ValueLayout.JAVA_INT, FUTURE_PID, Processes.currentPid());
            Shm.putString(s, DOORBELL, DOORBELL_CAPACITY, FileFutureWatcher.instance().doorbellName());
            // Fault the first page of the inline bytes in now: its first write would otherwise allocate and zero a page between
            // the completer's clock and the wake-up; attach maps it for the completer the same way.
            s.set(ValueLayout.JAVA_LONG, INLINE_BYTES, 0L);
            Shm.putIntRelease(s, MAGIC_OFFSET, MAGIC);
            OWNED.add(name);
            return new FilePromiseRegion(region);
        }
    }

    /**
     * Attaches to the region of a promise created in another process.
     *
     * @throws IllegalArgumentException if {@code name} is not a promise region's name
     * @throws IllegalStateException    if the region does not exist (its future was dropped) or holds another kind
     */
    static FilePromiseRegion attach(String name, int kind) {
        if (name == null || !name.startsWith(SharedRegion.PREFIX) || !name.contains("-pr-") || name.contains("/")) {
            throw new IllegalArgumentException("'" + name + "' does not name a File promise (dtorch-<instance>-pr-<n>)");
        }
        SharedRegion region = SharedRegion.open(name).orElseThrow(() -> new IllegalStateException("File promise " + name
            + " does not exist: its future was dropped, or its process is gone"));
        MemorySegment s = region.segment();
        if (region.size() != REGION_SIZE || Shm.getIntAcquire(s, MAGIC_OFFSET) != MAGIC || s.get(ValueLayout.JAVA_INT, KIND) != kind) {
            region.close();
            throw new IllegalStateException("shared memory " + name + " is not a File " + (kind == TENSOR ? "tensor" : "void")
                + " promise");
        }
        Shm.getIntAcquire(s, INLINE_BYTES); // maps the page the creator faulted in, so a completer's write does not fault
        return new FilePromiseRegion(region);
    }

    String name() {
        return region.name();
    }

    /** Another holder of the same mapping (the future of a promise made here). */
    FilePromiseRegion share() {
        if (!region.retain()) {
            throw new IllegalStateException("File promise " + name() + " is already released");
        }
        return new FilePromiseRegion(region, localError);
    }

    /** Drops this holder's mapping. */
    void release() {
        region.release();
    }

    // ---- completing ----------------------------------------------------------------------------------

    /** Publishes {@code value}; false if the promise was completed already. */
    boolean tryCompleteWithValue(Tensor value) {
        long[] shape = TorchTensors.shape(value);
        if (shape.length > MAX_DIMS) {
            throw new IllegalArgumentException("a File promise carries tensors of at most " + MAX_DIMS + " dims, got "
                + TorchTensors.describe(value));
        }
        if (value.is_cuda()) {
            return tryLend(value, shape);
        }
        if (!claim()) {
            return false;
        }
        try {
            ScalarType dtype = TorchTensors.dtype(value);
            long nbytes = writeHeader(shape, dtype);
            if (nbytes <= INLINE_CAPACITY) {
                seg.set(ValueLayout.JAVA_INT, PLACEMENT, INLINE);
                ShmTensors.copyInto(value, shape, dtype, seg.asSlice(INLINE_BYTES, INLINE_CAPACITY));
            } else {
                seg.set(ValueLayout.JAVA_INT, PLACEMENT, VALUE_REGION);
                writeValueRegion(value, nbytes);
            }
        } catch (RuntimeException e) {
            publish(ERROR_STATE, "setting the value failed: " + RemoteFailureException.describe(e));
            throw e;
        }
        publish(VALUE, null);
        return true;
    }

    /** Writes dtype, ndim, nbytes and shape; returns nbytes. */
    private long writeHeader(long[] shape, ScalarType dtype) {
        long nbytes = ShmTensors.byteSize(shape, dtype);
        seg.set(ValueLayout.JAVA_INT, DTYPE, dtype.value);
        seg.set(ValueLayout.JAVA_INT, NDIM, shape.length);
        seg.set(ValueLayout.JAVA_LONG, NBYTES, nbytes);
        for (int d = 0; d < shape.length; d++) {
            seg.set(ValueLayout.JAVA_LONG, SHAPE + 8L * d, shape[d]);
        }
        return nbytes;
    }

    /**
     * Publishes a CUDA value by lending it: an interprocess event recorded on the calling thread's current stream
     * of the value's device (where the value is taken to have been written; the host does not wait), and the
     * value's {@link CudaIpcDescriptor}. The loan ends when the future's process releases the value or exits.
     */
    private boolean tryLend(Tensor value, long[] shape) {
        DeviceStream stream = DeviceStream.of(TorchTensors.device(value)); // checks the device before the claim
        if (!claim()) {
            return false;
        }
        CudaIpcTensors.Loan loan = null;
        try {
            writeHeader(shape, TorchTensors.dtype(value));
            loan = CudaIpcTensors.lend(value, stream);
            loan.descriptor().writeTo(seg, IPC_DESCRIPTOR);
            Shm.putString(seg, LENDER_BELL, DOORBELL_CAPACITY, FileFutureWatcher.instance().doorbellName());
            seg.set(ValueLayout.JAVA_INT, PLACEMENT, CUDA_IPC);
        } catch (RuntimeException e) {
            if (loan != null) {
                loan.close();
            }
            publish(ERROR_STATE, "lending the CUDA value failed: " + RemoteFailureException.describe(e));
            throw e;
        }
        FilePromiseRegion watched = share();
        CudaIpcTensors.Loan lent = loan;
        publish(VALUE, null);
        FileFutureWatcher.instance().watch(() -> watched.endLoanIfReleased(lent));
        return true;
    }

    /**
     * The lender's check, on its watcher thread: once the future's process released the value (or is gone),
     * drops the loan and this holder's mapping; true then.
     */
    private boolean endLoanIfReleased(CudaIpcTensors.Loan loan) {
        if (Shm.getIntAcquire(seg, RELEASED) == 0 && Processes.isAlive(seg.get(ValueLayout.JAVA_INT, FUTURE_PID))) {
            return false;
        }
        try {
            loan.close();
        } finally {
            release();
        }
        return true;
    }

    private void writeValueRegion(Tensor value, long nbytes) {
        String valueName = name() + "-v";
        SharedRegion.unlink(valueName);
        try (SharedRegion data = SharedRegion.create(valueName, nbytes)
            .orElseThrow(() -> new IllegalStateException("cannot create " + valueName))) {
            ShmTensors.copyInto(value, data.segment());
        }
        if (Shm.getIntVolatile(seg, ABANDONED) != 0) {
            SharedRegion.unlink(valueName); // nobody will read it
        }
    }

    /** Publishes "done" without a value (a void promise); false if the promise was completed already. */
    boolean tryCompleteWithoutValue() {
        if (!claim()) {
            return false;
        }
        publish(VALUE, null);
        return true;
    }

    /** Publishes an error; false if the promise was completed already. */
    boolean tryCompleteWithError(Throwable error) {
        if (!claim()) {
            return false;
        }
        localError.set(error);
        publish(ERROR_STATE, RemoteFailureException.describe(error));
        return true;
    }

    /** The error, if this process set it; null if it came from elsewhere (then only its text is known). */
    Throwable localError() {
        return localError.get();
    }

    /**
     * Fails a promise whose completer died while writing it (state WRITING, writer gone); true if it did.
     * Lets a controller fail the futures of a killed worker even in that corner.
     */
    boolean failIfWriterDied(Throwable error) {
        int writer = seg.get(ValueLayout.JAVA_INT, WRITER_PID);
        if (Shm.getIntAcquire(seg, STATE) == WRITING && !Processes.isAlive(writer)
            && Shm.casInt(seg, WRITER_PID, writer, Processes.currentPid())) {
            localError.set(error);
            publish(ERROR_STATE, RemoteFailureException.describe(error));
            return true;
        }
        return false;
    }

    private boolean claim() {
        if (!Shm.casInt(seg, STATE, PENDING, WRITING)) {
            return false;
        }
        seg.set(ValueLayout.JAVA_INT, WRITER_PID, Processes.currentPid());
        return true;
    }

    private void publish(int state, String error) {
        if (error != null) {
            Shm.putString(seg, ERROR, ERROR_CAPACITY, error);
        }
        // A volatile store, not a release: the load of SLEEPERS below must not pass it. A reader increments SLEEPERS and
        // then sleeps only while STATE is still PENDING; were the load to overtake the store, both could miss the
        // other and the reader would sleep out its 100 ms slice (x86 may satisfy the load before the store leaves the
        // store buffer).
        Shm.putIntVolatile(seg, STATE, state);
        boolean woke = Shm.getIntVolatile(seg, SLEEPERS) > 0;
        if (woke) {
            Futex.wakeAll(seg, STATE);
        }
        FileFutureWatcher.ring(doorbell);
        if (woke) {
            // The scheduler tends to put a woken thread on the waker's CPU, where it waits until the waker blocks:
            // give the CPU up once, so that the reader runs before the clean-up below (27 to 11 us here).
            Thread.yield();
        }
        // The future's process keeps its own mapping; nobody needs to find the region by name any more, and
        // removing it here keeps the system call off the reader's path.
        SharedRegion.unlink(name());
    }

    // ---- reading -------------------------------------------------------------------------------------

    /** True once a value or an error is published. */
    boolean isDone() {
        int state = Shm.getIntAcquire(seg, STATE);
        return state == VALUE || state == ERROR_STATE;
    }

    /**
     * Waits until the promise is done or {@code timeoutNanos} pass: spins for the global spin budget,
     * then sleeps on the state word's futex.
     *
     * @return true if done
     */
    boolean awaitDone(long timeoutNanos, String what) {
        return awaitDone(timeoutNanos, what, null);
    }

    /**
     * As {@link #awaitDone(long, String)}; {@code beforeSleep}, if not null, is prepared once, before the first sleep on
     * the futex, while the thread has nothing else to do.
     */
    boolean awaitDone(long timeoutNanos, String what, PreparedReference beforeSleep) {
        if (isDone()) {
            return true;
        }
        long start = System.nanoTime();
        long spinEnd = start + Math.min(CommOptions.global().spinBeforePark().toNanos(), timeoutNanos);
        while (System.nanoTime() - spinEnd < 0) {
            if (isDone()) {
                return true;
            }
            Thread.onSpinWait();
        }
        while (true) {
            int state = Shm.getIntAcquire(seg, STATE);
            if (state == VALUE || state == ERROR_STATE) {
                return true;
            }
            long remaining = timeoutNanos - (System.nanoTime() - start);
            if (remaining <= 0) {
                return false;
            }
            if (Thread.currentThread().isInterrupted()) {
                throw new CommInterruptedException(what + " was interrupted while waiting for File promise " + name(), new InterruptedException());
            }
            if (beforeSleep != null) {
                beforeSleep.beforeSleep();
                beforeSleep = null;
                continue; // the state may have changed meanwhile: look again before sleeping
            }
            Shm.getAndAddInt(seg, SLEEPERS, 1);
            try {
                Futex.await(seg, STATE, state, Math.min(remaining, SLEEP_SLICE_NANOS));
            } finally {
                Shm.getAndAddInt(seg, SLEEPERS, -1);
            }
        }
    }

    /** The published error's text, or null if the promise holds a value. Call once done. */
    String errorText() {
        return Shm.getIntAcquire(seg, STATE) == ERROR_STATE ? Shm.getString(seg, ERROR) : null;
    }

    /**
     * The published value as a tensor the caller owns: a copy of a small value, a view of a large one
     * (its value region is unlinked once mapped). Call once done and when {@link #errorText()} is null. A small value
     * goes into the tensor {@code prepared} allocated for it, if not null and of the value's shape and dtype.
     */
    Tensor readValue(PreparedReference prepared) {
        Shm.getIntAcquire(seg, STATE);
        int ndim = seg.get(ValueLayout.JAVA_INT, NDIM);
        long[] shape = new long[ndim];
        for (int d = 0; d < ndim; d++) {
            shape[d] = seg.get(ValueLayout.JAVA_LONG, SHAPE + 8L * d);
        }
        int code = seg.get(ValueLayout.JAVA_INT, DTYPE);
        ScalarType dtype = TorchTensors.ofCode(code);
        if (dtype == null) {
            throw new IllegalStateException("File promise " + name() + " names dtype code " + code + ", which this libtorch does not know");
        }
        int placement = seg.get(ValueLayout.JAVA_INT, PLACEMENT);
        if (placement == INLINE) {
            Tensor target = prepared != null ? prepared.takeTarget(shape, dtype) : null;
            if (target == null) {
                return ShmTensors.copyOut(seg.asSlice(INLINE_BYTES, INLINE_CAPACITY), shape, dtype);
            }
            ShmTensors.copyOut(seg.asSlice(INLINE_BYTES, INLINE_CAPACITY), shape, dtype, prepared.targetAddress());
            return target;
        }
        if (placement == CUDA_IPC) {
            return viewLentValue(shape, dtype);
        }
        String valueName = name() + "-v";
        try (SharedRegion data = SharedRegion.open(valueName).orElseThrow(() -> new IllegalStateException(
            "the value of File promise " + name() + " is gone (" + valueName + " does not exist)"))) {
            SharedRegion.unlink(valueName);
            return ShmTensors.view(data, 0, shape, dtype);
        }
    }

    /**
     * A view of the CUDA value the completer lends, once the completer's writes are done: the future has no
     * stream, so the host waits (polling, with the completer's liveness and the global deadline); the view is then
     * usable on any stream. Its release (libtorch freed the last reference, and this process's work on the device
     * has passed) tells the completer.
     */
    private Tensor viewLentValue(long[] shape, ScalarType dtype) {
        CudaIpcDescriptor descriptor = CudaIpcDescriptor.readFrom(seg, IPC_DESCRIPTOR);
        int lender = seg.get(ValueLayout.JAVA_INT, WRITER_PID);
        if (!Processes.isAlive(lender)) {
            throw new IllegalStateException("the process that set the CUDA value of File promise " + name() + " (pid " + lender
                + ") has exited; the GPU memory it lent is gone");
        }
        if (!descriptor.isEmpty()) {
            try (DeviceEvent written = DeviceEvent.openIpcCached(Device.cuda(descriptor.device()), descriptor.eventHandle(), lender)) {
                awaitLenderWrites(written, lender);
            }
        }
        FilePromiseRegion lease = share();
        viewed = true;
        try {
            return CudaIpcTensors.view(descriptor, shape, dtype, lease::releaseLentValue);
        } catch (RuntimeException | Error e) {
            viewed = false;
            lease.release();
            throw e;
        }
    }

    private void awaitLenderWrites(DeviceEvent written, int lender) {
        Deadline deadline = Deadline.after(CommOptions.global().timeout());
        long nextCheck = System.nanoTime() + LENDER_CHECK_NANOS;
        while (!written.query()) {
            if (deadline.expired()) {
                throw new CommTimeoutException("reading File promise " + name() + " " + deadline.timedOutAfter()
                    + ": the GPU work of pid " + lender + " that writes its CUDA value has not finished");
            }
            if (Thread.currentThread().isInterrupted()) {
                throw new CommInterruptedException("reading File promise " + name() + " was interrupted", new InterruptedException());
            }
            if (System.nanoTime() - nextCheck >= 0) {
                nextCheck = System.nanoTime() + LENDER_CHECK_NANOS;
                if (!Processes.isAlive(lender)) {
                    throw new IllegalStateException("the process that set the CUDA value of File promise " + name() + " (pid " + lender
                        + ") exited before its GPU work that writes the value finished");
                }
            }
            LockSupport.parkNanos(EVENT_POLL_NANOS);
        }
    }

    /** The view's release: tells the lender it may free the value, then drops this holder's mapping. */
    private void releaseLentValue() {
        try {
            signalReleased();
        } finally {
            release();
        }
    }

    private void signalReleased() {
        Shm.putIntRelease(seg, RELEASED, 1);
        FileFutureWatcher.ring(Shm.getString(seg, LENDER_BELL));
    }

    /**
     * The future read the outcome: nothing of this process needs the names any more (the completer removed
     * the region's name; the reader removed the value region's once it mapped it).
     */
    void forget() {
        OWNED.remove(name());
    }

    /**
     * The future side is gone unread: remove the names, so that nothing is left once mappings close. A
     * setter that comes later sees {@code abandoned} and removes what it creates.
     */
    void abandon() {
        Shm.putIntVolatile(seg, ABANDONED, 1);
        if (!viewed) {
            signalReleased(); // a lent CUDA value nobody here views: its lender may free it (nothing else watches this)
        }
        SharedRegion.unlink(name());
        SharedRegion.unlink(name() + "-v");
        OWNED.remove(name());
    }
}
