package org.dtorch.polyglot.torch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Autograd through the operators Python calls ({@link BoundCall}, the dispatcher's boxed path): the gradients they give
 * equal those of libtorch's own C++ API on the same values, grad mode is the calling thread's, and inference-mode
 * scopes are left where they were entered.
 */
@Timeout(120)
class AutogradTest {
    private static final long WAIT_S = 60;

    private final TorchModule module = TorchModule.shared();
    private final Autograd autograd = module.autograd();

    @AfterEach
    void freshModes() {
        autograd.resetThread();
    }

    private Object call(String op, String key, Object... args) {
        return module.op(op).resolve(key).call(args);
    }

    private static PyTensor tensor(double... values) {
        try (DoublePointer data = new DoublePointer(values);
             TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Double));
             Tensor view = torch.from_blob(data, new long[] {values.length}, options)) {
            return PyTensor.wrap(view.clone());
        }
    }

    private static double[] values(Tensor t) {
        try (PyTensor p = PyTensor.wrap(new Tensor(t))) {
            return p.doubles();
        }
    }

    @Test
    void shouldGiveTheGradientsOfLibtorchsOwnApiThroughTheDispatcher() {
        torch.manual_seed(7);
        try (Tensor x = torch.randn(5, 4); Tensor w = torch.randn(3, 4); Tensor b = torch.randn(3); Tensor g = torch.randn(5, 3)) {
            // libtorch's C++ API, on copies of the same values.
            double[] expectedW;
            double[] expectedB;
            try (Tensor wRef = w.clone(); Tensor bRef = b.clone()) {
                wRef.requires_grad_(true);
                bRef.requires_grad_(true);
                try (Tensor y = torch.linear(x, wRef, bRef); Tensor weighted = y.mul(g); Tensor loss = weighted.sum()) {
                    loss.backward();
                }
                expectedW = values(wRef.grad());
                expectedB = values(bRef.grad());
            }
            // The same pass through the operators the Python shim calls.
            PyTensor px = PyTensor.wrap(x.clone());
            PyTensor pw = PyTensor.wrap(w.clone());
            PyTensor pb = PyTensor.wrap(b.clone());
            PyTensor pg = PyTensor.wrap(g.clone());
            autograd.setRequiresGrad(pw, true);
            autograd.setRequiresGrad(pb, true);
            PyTensor y = (PyTensor) call("linear", "T,T,T", px, pw, pb);
            PyTensor loss = (PyTensor) call("sum", "T", call("mul", "T,T", y, pg));
            assertEquals("SumBackward0", autograd.gradFn(loss));
            assertFalse(autograd.isLeaf(loss));
            autograd.runBackward(List.of(loss), List.of(), -1, false, List.of());
            assertArrayEquals(expectedW, autograd.grad(pw).doubles(), 1e-6);
            assertArrayEquals(expectedB, autograd.grad(pb).doubles(), 1e-6);
            assertNull(autograd.grad(px), "x does not require grad");
            // The closed form: dL/dW = g^T x.
            try (Tensor gt = g.t(); Tensor formula = gt.matmul(x)) {
                assertArrayEquals(values(formula), autograd.grad(pw).doubles(), 1e-5);
            }
        }
    }

    @Test
    void shouldReturnGradientsWithoutAccumulatingAndNullForUnusedInputs() {
        PyTensor x = tensor(1, 2);
        PyTensor unused = tensor(5);
        autograd.setRequiresGrad(x, true);
        autograd.setRequiresGrad(unused, true);
        PyTensor cube = (PyTensor) call("pow", "T,i", x, 3L);
        PyTensor s = (PyTensor) call("sum", "T", cube);
        PyTensor[] grads = autograd.computeGradients(List.of(s), Arrays.asList(x, unused), List.of(), 1, false, true);
        assertArrayEquals(new double[] {3, 12}, grads[0].doubles(), 1e-12);
        assertNull(grads[1]);
        assertNull(autograd.grad(x), "grad() accumulates nothing");
        RuntimeException e = assertThrows(RuntimeException.class,
            () -> autograd.computeGradients(List.of(s), List.of(unused), List.of(), 0, false, false));
        assertTrue(e.getMessage().contains("not have been used in the graph"), e.getMessage());
    }

    @Test
    void shouldCheckAnAssignedGradientAndReplaceOrRemoveIt() {
        PyTensor x = tensor(1, 2, 3);
        autograd.setRequiresGrad(x, true);
        PyTensor ones = (PyTensor) call("ones_like", "T", x);
        autograd.setGrad(x, ones);
        assertArrayEquals(new double[] {1, 1, 1}, autograd.grad(x).doubles());
        PyTensor wrongSize = (PyTensor) call("ones", "i", 4L);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> autograd.setGrad(x, wrongSize));
        assertTrue(e.getMessage().contains("different size"), e.getMessage());
        autograd.setGrad(x, null);
        assertNull(autograd.grad(x));
    }

    @Test
    void shouldRefuseToReplaceTheDataUnderAPinnedView() {
        PyTensor x = tensor(1, 2);
        PyTensor other = tensor(3, 4, 5);
        x.pin();
        try {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> autograd.setData(x, other));
            assertTrue(e.getMessage().contains("memoryview"), e.getMessage());
        } finally {
            x.unpin();
        }
        autograd.setData(x, other);
        assertArrayEquals(new long[] {3}, x.shape());
    }

    @Test
    void shouldKeepGradModeToTheThreadThatSetsIt() throws Exception {
        PyTensor x = tensor(2);
        autograd.setRequiresGrad(x, true);
        CountDownLatch off = new CountDownLatch(1);
        CountDownLatch checked = new CountDownLatch(1);
        ExecutorService other = Executors.newSingleThreadExecutor();
        try {
            Future<Boolean> recordedElsewhere = other.submit(() -> {
                assertTrue(off.await(WAIT_S, TimeUnit.SECONDS), "this thread switching grad mode off");
                try {
                    PyTensor y = (PyTensor) call("mul", "T,T", x, x);
                    return autograd.isGradEnabled() && autograd.requiresGrad(y);
                } finally {
                    checked.countDown();
                }
            });
            autograd.setGradEnabled(false);
            off.countDown();
            assertTrue(checked.await(WAIT_S, TimeUnit.SECONDS), "the other thread's operator");
            assertFalse(autograd.requiresGrad((PyTensor) call("mul", "T,T", x, x)), "nothing recorded here");
            assertTrue(recordedElsewhere.get(WAIT_S, TimeUnit.SECONDS), "the other thread records");
        } finally {
            autograd.setGradEnabled(true);
            other.shutdownNow();
            assertTrue(other.awaitTermination(WAIT_S, TimeUnit.SECONDS));
        }
    }

    @Test
    void shouldLeaveAnInferenceScopeOnlyOnItsThreadAndInnermostFirst() throws Exception {
        Autograd.InferenceScope outer = autograd.enterInferenceMode(true);
        assertTrue(autograd.isInferenceModeEnabled());
        assertFalse(autograd.isGradEnabled(), "inference mode records nothing");
        PyTensor made = (PyTensor) call("ones", "i", 2L);
        assertTrue(autograd.isInference(made));
        ExecutorService other = Executors.newSingleThreadExecutor();
        try {
            Future<?> elsewhere = other.submit(outer::close);
            Exception e = assertThrows(Exception.class, () -> elsewhere.get(WAIT_S, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof IllegalStateException && e.getCause().getMessage().contains("thread that entered it"), e.toString());
        } finally {
            other.shutdownNow();
            assertTrue(other.awaitTermination(WAIT_S, TimeUnit.SECONDS));
        }
        Autograd.InferenceScope inner = autograd.enterInferenceMode(false);
        assertFalse(autograd.isInferenceModeEnabled());
        assertThrows(IllegalStateException.class, outer::close, "the inner scope is still open");
        inner.close();
        assertTrue(autograd.isInferenceModeEnabled());
        outer.close();
        outer.close();
        assertFalse(autograd.isInferenceModeEnabled());
        assertTrue(autograd.isGradEnabled());
    }

    @Test
    void shouldResetAThreadToAFreshThreadsModes() {
        autograd.enterInferenceMode(true);
        autograd.setGradEnabled(false);
        autograd.resetThread();
        assertFalse(autograd.isInferenceModeEnabled());
        assertTrue(autograd.isGradEnabled());
        PyTensor x = (PyTensor) call("ones", "i", 2L);
        assertFalse(autograd.isInference(x));
        assertNotNull(x);
    }
}
