package org.dtorch.ops.aten;

import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.LongOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;

/**
 * Each thread's holders of libtorch's optional arguments ({@code start}, {@code end}, a number, a tensor), set before a
 * call and reused by the next: a worker runs a decode step's slices, norms and attention with no JavaCPP handle made and
 * freed per optional argument (each costs a native allocation and the deallocator's bookkeeping).
 *
 * <p>Not thread-safe: each thread has its own ({@link #get}); a holder's value lasts until the thread sets it again, so a
 * caller sets what it passes right before the libtorch call that reads it, and clears a tensor holder after it
 * ({@link #clearTensor}), so that no tensor outlives its call there.
 */
public final class ThreadOptionals {
    private static final ThreadLocal<ThreadOptionals> OF_THREAD = ThreadLocal.withInitial(ThreadOptionals::new);

    private final LongOptional start = new LongOptional();
    private final LongOptional end = new LongOptional();
    private final DoubleOptional number = new DoubleOptional();
    private final TensorOptional tensor = new TensorOptional();

    private ThreadOptionals() {
    }

    /** The calling thread's holders. */
    public static ThreadOptionals get() {
        return OF_THREAD.get();
    }

    /** The start holder, set to {@code value} (null: none). */
    public LongOptional start(Long value) {
        return set(start, value);
    }

    /** The end holder, set to {@code value} (null: none). */
    public LongOptional end(Long value) {
        return set(end, value);
    }

    /** The number holder, set to {@code value} (null: none). */
    public DoubleOptional number(Double value) {
        if (value == null) {
            number.reset();
        } else {
            number.put(value.doubleValue());
        }
        return number;
    }

    /** The tensor holder, holding a reference of {@code value} (null: none) until {@link #clearTensor}. */
    public TensorOptional tensor(Tensor value) {
        if (value == null) {
            tensor.reset();
        } else {
            tensor.put(value);
        }
        return tensor;
    }

    /** Drops the tensor holder's reference. */
    public void clearTensor() {
        tensor.reset();
    }

    private static LongOptional set(LongOptional holder, Long value) {
        if (value == null) {
            holder.reset();
        } else {
            holder.put(value.longValue());
        }
        return holder;
    }
}
