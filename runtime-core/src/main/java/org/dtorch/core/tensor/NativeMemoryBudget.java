package org.dtorch.core.tensor;

import java.lang.ref.Cleaner;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import org.dtorch.core.device.DeviceKind;

/**
 * Native memory that only the garbage collector may free: the bytes behind handles that release their
 * memory on {@code close()} or, when a program drops them, through a {@link Cleaner}. The Java objects
 * are a few dozen bytes each, so a program that drops 1 MiB tensors in a loop fills native memory long
 * before the Java heap asks for a collection (22 GB after 10,000 iterations of a Python loop, until the
 * kernel killed the JVM). Every such owner charges its bytes here; when the bytes charged and not yet
 * released exceed the budget, the charging thread requests a collection ({@link System#gc()}), whose
 * Cleaners then release the dropped owners.
 *
 * <p>A collection is requested at most once per {@code max(budget, held)} bytes charged, where {@code held} is
 * the fewest bytes outstanding since the previous request (at that request, less whatever was released after it:
 * what the program still holds once the collection's Cleaners ran), so a program that legitimately holds more
 * than the budget pays one collection per that many new bytes, not one per allocation, while dropped memory that
 * a collection gave back does not space the next one out; a program that closes what it allocates
 * never reaches the budget and never pays. Over-counting (two owners sharing one buffer) only brings collections
 * earlier.
 *
 * <p>The charging thread runs the collection itself, so no more than about a budget of dropped memory
 * ever waits for one; with the default collector that is a full, stop-the-world collection. (Requesting it
 * from a thread of its own, or with {@code -XX:+ExplicitGCInvokesConcurrent}, was measured: no faster on
 * two cores, and dropped memory then peaked at one and a half to two budgets.)
 *
 * <p>The budget comes from {@value #BUDGET_PROPERTY} (MiB, default {@value #DEFAULT_BUDGET_MIB}); {@code 0}
 * turns the requests off (charges are still counted). {@code -XX:+DisableExplicitGC} also defeats them.
 * Tensors in a GPU's memory charge a budget of their own ({@link #of}), {@value #CUDA_BUDGET_PROPERTY} (MiB, default
 * {@value #DEFAULT_CUDA_BUDGET_MIB}): a GPU has tens of GiB, and a training step on one drops tens of MiB of
 * activations many times a second, which the young collections the Java heap asks for anyway release in time; under
 * a budget of the host's size such a step would pay a full collection (over 100 ms on an H100's host) about every
 * second.
 *
 * <p>Thread-safe: any thread may charge, register and release; Cleaner threads release concurrently.
 */
public final class NativeMemoryBudget {
    /** System property: the budget in MiB; 0 never requests a collection. */
    public static final String BUDGET_PROPERTY = "dtorch.memory.gcBudgetMiB";
    /** Default budget in MiB when the property is absent. */
    public static final long DEFAULT_BUDGET_MIB = 512;

    /** System property: the budget of tensors in GPU memory in MiB; 0 never requests a collection. */
    public static final String CUDA_BUDGET_PROPERTY = "dtorch.memory.cudaGcBudgetMiB";
    /** Default budget of tensors in GPU memory in MiB when the property is absent. */
    public static final long DEFAULT_CUDA_BUDGET_MIB = 4096;

    private static final NativeMemoryBudget GLOBAL = new NativeMemoryBudget(Long.getLong(BUDGET_PROPERTY, DEFAULT_BUDGET_MIB) << 20, System::gc);
    private static final NativeMemoryBudget CUDA = new NativeMemoryBudget(
        Long.getLong(CUDA_BUDGET_PROPERTY, DEFAULT_CUDA_BUDGET_MIB) << 20, System::gc);
    private static final Cleaner CLEANER = Cleaner.create();

    private final long budgetBytes;
    private final Runnable collector;
    private final AtomicLong outstanding = new AtomicLong();
    private final AtomicLong chargedSinceRequest = new AtomicLong();
    private final AtomicLong collectionsRequested = new AtomicLong();
    private final AtomicLong collectionNanos = new AtomicLong();
    /** The fewest bytes outstanding since the last request (0 before any): what spaces the next request. */
    private final AtomicLong heldSinceRequest = new AtomicLong();

    /** A budget of {@code budgetBytes} (0: never request a collection) whose requests run {@code collector}. */
    NativeMemoryBudget(long budgetBytes, Runnable collector) {
        if (budgetBytes < 0) {
            throw new IllegalArgumentException(BUDGET_PROPERTY + " must be >= 0, got " + (budgetBytes >> 20) + " MiB");
        }
        this.budgetBytes = budgetBytes;
        this.collector = Objects.requireNonNull(collector, "collector");
    }

    /** The budget of this JVM, shared by every runtime in it: host memory, and every kind but a GPU's. */
    public static NativeMemoryBudget global() {
        return GLOBAL;
    }

    /** The budget that tensors on devices of {@code kind} charge: the GPUs' own for CUDA, else {@link #global()}. */
    public static NativeMemoryBudget of(DeviceKind kind) {
        return kind == DeviceKind.CUDA ? CUDA : GLOBAL;
    }

    /**
     * Charges {@code bytes} for {@code owner} and returns the cleanable that releases them: {@code release}
     * runs once, on {@link Cleaner.Cleanable#clean()} (the owner's {@code close()}) or when the collector
     * finds the owner unreachable, and the bytes are credited back after it. {@code release} must not
     * refer to {@code owner}, or the owner never becomes unreachable.
     */
    public Cleaner.Cleanable register(Object owner, long bytes, Runnable release) {
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(release, "release");
        charge(bytes);
        return CLEANER.register(owner, new Credit(this, bytes, release));
    }

    /** Runs the owner's release, then credits its bytes back; holds no reference to the owner. */
    private record Credit(NativeMemoryBudget budget, long bytes, Runnable release) implements Runnable {
        @Override
        public void run() {
            try {
                release.run();
            } finally {
                budget.release(bytes);
            }
        }
    }

    /** Counts {@code bytes} more, and requests a collection if that crosses the budget (see the class comment). */
    public void charge(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("charge: bytes must be >= 0, got " + bytes);
        }
        long now = outstanding.addAndGet(bytes);
        long since = chargedSinceRequest.addAndGet(bytes);
        if (budgetBytes == 0 || now <= budgetBytes || since <= spacing()) {
            return;
        }
        synchronized (this) {
            if (chargedSinceRequest.get() <= spacing()) {
                return; // another thread requested one meanwhile
            }
            chargedSinceRequest.set(0);
            heldSinceRequest.set(now);
            collectionsRequested.incrementAndGet();
        }
        long start = System.nanoTime();
        collector.run();
        collectionNanos.addAndGet(System.nanoTime() - start);
    }

    /** Counts {@code bytes} less (an owner released them). */
    public void release(long bytes) {
        long now = outstanding.addAndGet(-bytes);
        heldSinceRequest.accumulateAndGet(now, Math::min);
    }

    /** How many bytes are charged between two requests: the budget, or more while more is held. */
    private long spacing() {
        return Math.max(budgetBytes, heldSinceRequest.get());
    }

    /** Bytes charged and not released. */
    public long outstandingBytes() {
        return outstanding.get();
    }

    /** The budget in bytes; 0 when collections are never requested. */
    public long budgetBytes() {
        return budgetBytes;
    }

    /** How many collections this budget requested so far. */
    public long collectionsRequested() {
        return collectionsRequested.get();
    }

    /** How long charging threads spent in the collections they requested, in total. */
    public Duration collectionTime() {
        return Duration.ofNanos(collectionNanos.get());
    }

    @Override
    public String toString() {
        return "NativeMemoryBudget(" + (outstanding.get() >> 20) + " of " + (budgetBytes >> 20) + " MiB outstanding, "
            + collectionsRequested() + " collections requested, " + collectionTime().toMillis() + " ms collecting)";
    }
}
