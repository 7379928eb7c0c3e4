package org.dtorch.core.communication.promise;

import org.dtorch.core.tensor.TorchTensors;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.ShmTensors;

/**
 * The native work a getter does while it has nothing else to do, just before it parks or sleeps, so that neither
 * the completer nor the woken getter makes a handle or calls libtorch between the completion and the getter's return:
 * a JavaCPP handle costs a native allocation, an upcall and a registration under a JVM-wide lock, and any first native
 * call on a thread just back from a sleep costs microseconds, while filling a handle made earlier ({@code put}, an
 * {@code at::Tensor} assignment) on the completer's running thread costs a fraction of one.
 *
 * <p>Three forms, by what the getter waits on:
 * <ul>
 *   <li>a MEMORY promise: the getter lends the completer a {@link Lent} pair through the promise's slot; the completer
 *       fills both handles with references to the value (one becomes the promise's own, the other the getter's result)
 *       and only then completes, so the woken getter returns its result without a native call;</li>
 *   <li>a File promise whose value's shape and dtype are known ({@link ExpectedValue}): the getter allocates the value's
 *       tensor and its result reference to it, so the woken getter only copies bytes out of shared memory into it;</li>
 *   <li>otherwise: an empty result handle, filled after the wake-up.</li>
 * </ul>
 *
 * <p>Ownership of a lent pair: whichever of the completer's take ({@code getAndSet(null)} on the slot) and the getter's
 * take-back ({@code compareAndSet(lent, null)}) comes first owns both handles; once the completer took them, the pair's
 * state decides who closes the result handle: the completer moves it from {@code LENT} to {@code FILLED} after filling
 * (the getter owns it then), or finds {@code ABANDONED} (the getter gave up waiting) and closes it. The promise's own
 * handle is always the completer's once taken.
 *
 * <p>Not thread-safe: one {@code get()} or {@code waitFor} call's; the slot and the pair's state are atomic.
 */
final class PreparedReference implements AutoCloseable {

    /** A getter's two handles for a MEMORY completer: the promise's own reference and the getter's result. */
    static final class Lent {
        private static final int LENT = 0;
        private static final int FILLED = 1;
        private static final int ABANDONED = 2;
        final Tensor own = new Tensor();
        final Tensor result = new Tensor();
        private final AtomicInteger state = new AtomicInteger(LENT);
    }

    /** The slot a MEMORY completer takes a lent pair from; null for File futures (the completer lives elsewhere). */
    private final AtomicReference<Lent> slot;
    /** What a File future's value will be, or null when unknown. */
    private final ExpectedValue expected;
    private Lent lent;
    private Tensor result;
    /** The tensor {@link #result} already refers to (the pre-allocated value), or null when it is empty. */
    private Tensor resultRefersTo;
    /** The pre-allocated value until {@link #takeTarget} hands it out; and where its bytes go. */
    private Tensor target;
    private long targetAddress;

    /** Prepares only the getter's own result handle. */
    PreparedReference() {
        this(null, null);
    }

    /** Prepares a pair the completer fills, lent through {@code slot} (a MEMORY promise's). */
    PreparedReference(AtomicReference<Lent> slot) {
        this(slot, null);
    }

    /** Prepares the value's tensor itself when {@code expected} is not null (a File future's). */
    PreparedReference(ExpectedValue expected) {
        this(null, expected);
    }

    private PreparedReference(AtomicReference<Lent> slot, ExpectedValue expected) {
        this.slot = slot;
        this.expected = expected;
    }

    /** Does the native work; called once, right before the first park or sleep. */
    void beforeSleep() {
        if (lent != null || result != null) {
            return;
        }
        if (slot != null) {
            Lent pair = new Lent();
            if (slot.compareAndSet(null, pair)) {
                lent = pair;
                return;
            }
            closeBoth(pair); // another getter lent one already
        }
        if (expected != null) {
            target = ShmTensors.empty(expected.shape(), expected.dtype());
            targetAddress = TorchTensors.address(target);
            result = new Tensor(target);
            resultRefersTo = target;
            return;
        }
        result = new Tensor();
    }

    /**
     * The pre-allocated value for a value of {@code shape} and {@code dtype}, which the caller owns from now on and
     * fills at {@link #targetAddress()}; null when nothing was allocated or it does not fit.
     */
    Tensor takeTarget(long[] shape, ScalarType dtype) {
        if (target == null || expected.dtype() != dtype || !Arrays.equals(expected.shape(), shape)) {
            return null;
        }
        Tensor taken = target;
        target = null;
        return taken;
    }

    /** Where the bytes of the tensor {@link #takeTarget} gave go. */
    long targetAddress() {
        return targetAddress;
    }

    /**
     * A new reference to {@code value} the caller owns: a prepared handle (filled by the completer, or referring to
     * the pre-allocated value already, or filled now), or a new one if none was made.
     */
    Tensor referenceTo(Tensor value) {
        if (lent != null) {
            return lentReferenceTo(value);
        }
        Tensor prepared = result;
        if (prepared == null) {
            return new Tensor(value);
        }
        result = null;
        if (resultRefersTo != value) {
            prepared.put(value);
        }
        return prepared;
    }

    private Tensor lentReferenceTo(Tensor value) {
        Lent pair = lent;
        lent = null;
        if (slot.compareAndSet(pair, null)) {
            pair.own.close(); // another thread completed without taking the pair
            pair.result.put(value);
            return pair.result;
        }
        if (pair.state.compareAndSet(Lent.LENT, Lent.ABANDONED)) {
            return new Tensor(value); // a completer that lost the race to complete is still filling: it closes the pair
        }
        if (pair.own != value) {
            pair.result.put(value); // filled by a completer that lost the race to another one
        }
        return pair.result;
    }

    /**
     * A handle for a MEMORY completer's own reference to {@code value}, which the caller owns: the lent pair's, with the
     * getter's result filled too, or a new one when no getter lent a pair.
     */
    static Tensor takeSpareFor(AtomicReference<Lent> slot, Tensor value) {
        return fill(slot.getAndSet(null), value);
    }

    /** The completer's side once it took {@code pair} (null: none was lent): fills it; returns the promise's own handle. */
    static Tensor fill(Lent pair, Tensor value) {
        if (pair == null) {
            return new Tensor(value);
        }
        pair.own.put(value);
        pair.result.put(value);
        if (!pair.state.compareAndSet(Lent.LENT, Lent.FILLED)) {
            pair.result.close(); // the getter gave up waiting
        }
        return pair.own;
    }

    /** Closes what was prepared and not handed out, and takes back a pair the completer did not take. */
    @Override
    public void close() {
        if (lent != null) {
            Lent pair = lent;
            lent = null;
            if (slot.compareAndSet(pair, null)) {
                closeBoth(pair);
            } else if (!pair.state.compareAndSet(Lent.LENT, Lent.ABANDONED)) {
                pair.result.close(); // filled for this getter, which is not returning it
            }
        }
        if (result != null) {
            result.close();
            result = null;
        }
        if (target != null) {
            target.close();
            target = null;
        }
    }

    private static void closeBoth(Lent pair) {
        pair.own.close();
        pair.result.close();
    }
}
