package org.dtorch.ops;

import java.util.List;
import java.util.function.Supplier;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.DispatchKeySet;
import org.bytedeco.pytorch.ForceDispatchKeyGuard;
import org.bytedeco.pytorch.GradMode;
import org.bytedeco.pytorch.LocalDispatchKeySet;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;

/**
 * libtorch's autograd on a worker thread, for the kernels that run libtorch's own derivative of a call. Workers
 * dispatch below autograd (their kernels record nothing and pay nothing for it); {@link #on} puts the autograd layer and
 * grad mode back for the duration of one body, on the calling thread only.
 *
 * <p>Thread-safe: acts on the calling thread's dispatch state alone.
 */
final class WorkerAutograd {
    private WorkerAutograd() {
    }

    /** {@code body}'s result, computed with libtorch's autograd recording on this thread; the thread's state restored after. */
    static <T> T on(Supplier<T> body) {
        boolean recording = GradMode.is_enabled();
        GradMode.set_enabled(true);
        try (LocalDispatchKeySet tls = torch.tls_local_dispatch_key_set(); DispatchKeySet included = tls.included_();
             DispatchKeySet excluded = tls.excluded_(); DispatchKeySet autograd = torch.autograd_dispatch_keyset_with_ADInplaceOrView();
             DispatchKeySet kept = excluded.subtract(autograd); ForceDispatchKeyGuard withAutograd = new ForceDispatchKeyGuard(included, kept)) {
            return body.get();
        } finally {
            GradMode.set_enabled(recording);
        }
    }

    /**
     * The gradients of {@code output} against each of {@code inputs} for the output's gradient {@code g}
     * ({@code torch::autograd::grad}), each a new reference of its own; the graph is kept when {@code retain}.
     */
    static List<Tensor> grad(Tensor output, List<Tensor> inputs, Tensor g, boolean retain) {
        return on(() -> {
            try (TensorVector outs = new TensorVector(output); TensorVector wrt = new TensorVector(inputs.toArray(Tensor[]::new));
                 TensorVector grad = new TensorVector(g); BoolOptional keep = new BoolOptional(retain);
                 TensorVector grads = torch.grad(outs, wrt, grad, keep, false, false)) {
                // The vector's elements live in it: each gradient gets a reference of its own before it goes.
                Tensor[] result = new Tensor[inputs.size()];
                for (int i = 0; i < result.length; i++) {
                    result[i] = new Tensor(grads.get(i));
                }
                return List.of(result);
            }
        });
    }
}
