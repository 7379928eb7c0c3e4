package org.dtorch.ops;

import java.util.List;
import java.util.function.Function;
import org.dtorch.core.graph.TensorMeta;

/**
 * A spec's last answer about its inputs (a placement decision, a redistribution plan, a kernel) and the inputs it was
 * for. One operator asks its spec the same question several times (the implicit moves' fit, the client's inference,
 * the graph history, every device's kernel); the later questions are answered here, by the inputs' identity, without
 * hashing them into a cache again.
 *
 * <p>Thread-safe: one immutable entry, replaced whole (a race computes the answer twice, harmlessly).
 *
 * @param <T> the answer
 */
final class LastResult<T> {
    private volatile Entry<T> last;

    private record Entry<T>(List<TensorMeta> inputs, T result) {
        boolean isFor(List<TensorMeta> metas) {
            if (metas.size() != inputs.size()) {
                return false;
            }
            for (int i = 0; i < metas.size(); i++) {
                if (metas.get(i) != inputs.get(i)) {
                    return false;
                }
            }
            return true;
        }
    }

    /** The answer for {@code inputs}: the last one if it was for these very inputs, else {@code compute}'s, kept. */
    T of(List<TensorMeta> inputs, Function<List<TensorMeta>, T> compute) {
        Entry<T> entry = last;
        if (entry != null && entry.isFor(inputs)) {
            return entry.result();
        }
        T result = compute.apply(inputs);
        last = new Entry<>(List.copyOf(inputs), result);
        return result;
    }
}
