package org.dtorch.polyglot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.polyglot.torch.PyTensor;
import org.graalvm.polyglot.Engine;
import org.graalvm.polyglot.Value;
import org.graalvm.polyglot.proxy.ProxyExecutable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A {@code memoryview} of a {@code HostTensor} stays valid when the tensor is closed under it: the memory is
 * freed when the last view goes, not before (it used to be freed at once, and the view read freed memory).
 * The tensor here is the only owner of its memory, as a value is once its future has been collected. In
 * this package for the package-private constructor; here rather than in polyglot-bindings because the
 * Python package lives in python-facade.
 */
@Timeout(120)
class HostTensorViewTest {
    /** 64 KiB: below glibc's mmap threshold, so a freed buffer is reused by the next one of its size. */
    private static final long ELEMENTS = 16 * 1024;
    private static final Engine ENGINE = PythonHost.sharedEngine();

    private static final String SCRIPT = String.join("\n",
        "import gc, time",
        "ELEMENTS = " + ELEMENTS,
        "from torch._tensor import make_tensor as HostTensor",
        "def view_after_close(java, churn):",
        "    h = HostTensor(java)",
        "    view = h.memoryview()",
        "    expected = bytes(view)",
        "    h.close()",
        "    churn()",
        "    return bytes(view) == expected",
        "def released_view_unpins(java):",
        "    h = HostTensor(java)",
        "    view = h.memoryview()",
        "    first = view[1]",
        "    h.close()",
        "    view.release()",
        "    del view",
        "    deadline = time.monotonic() + 30",
        "    while java.pinCount() > 0 and time.monotonic() < deadline:",
        "        gc.collect()",
        "        time.sleep(0.01)",
        "    return first",
        "def closed_refuses(java):",
        "    with HostTensor(java) as h:",
        "        assert h.tobytes()[:4] == bytes(4)",
        "    assert h.closed and h.shape == (ELEMENTS,) and h.nbytes == 4 * ELEMENTS",
        "    for method in (h.tolist, h.memoryview, h.tobytes):",
        "        try:",
        "            method()",
        "        except RuntimeError as e:",
        "            assert 'is closed' in str(e), str(e)",
        "        else:",
        "            raise AssertionError(method.__name__ + ' read a closed HostTensor')",
        "    h.close()",
        "    return repr(h)",
        "");

    @AfterAll
    static void closeEngine() {
        ENGINE.close();
    }

    private static Tensor arange() {
        try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Float))) {
            return torch.arange(new org.bytedeco.pytorch.Scalar(ELEMENTS), options);
        }
    }

    /** Allocates and fills buffers of the freed one's size on this thread, as later work would. */
    private static void churn() {
        for (int i = 0; i < 8; i++) {
            try (TensorOptions options = new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Float));
                 Tensor t = torch.full(new long[] {ELEMENTS}, new org.bytedeco.pytorch.Scalar(-7.0), options);
                 Tensor sum = t.sum()) {
                assertEquals(-7.0, sum.item_double() / ELEMENTS);
            }
        }
    }

    @Test
    void shouldKeepAViewValidAfterItsTensorIsClosed() {
        try (PythonHost host = PythonHost.builder().engine(ENGINE).build()) {
            host.eval(SCRIPT);
            Value check = host.eval("view_after_close");
            PyTensor value = PyTensor.wrapValue(arange());
            ProxyExecutable churning = args -> {
                churn();
                return null;
            };
            assertTrue(check.execute(value, churning).asBoolean(),
                "a memoryview read other bytes after close(): the memory under it was freed");
        }
    }

    @Test
    void shouldFreeTheMemoryWhenTheLastViewIsReleased() {
        try (PythonHost host = PythonHost.builder().engine(ENGINE).build()) {
            host.eval(SCRIPT);
            PyTensor value = PyTensor.wrapValue(arange());
            assertEquals(1.0, host.eval("released_view_unpins").execute(value).asDouble());
            assertEquals(0, value.pinCount(), "the view's finalizer must unpin once the view is collected");
            assertTrue(value.isReleased(), "the closed value must be freed once no view pins it");
        }
    }

    @Test
    void shouldRefuseToReadAClosedValueAndCloseAtTheEndOfAWithBlock() {
        try (PythonHost host = PythonHost.builder().engine(ENGINE).build()) {
            host.eval(SCRIPT);
            PyTensor value = PyTensor.wrapValue(arange());
            String repr = host.eval("closed_refuses").execute(value).asString();
            assertTrue(value.isClosed() && value.isReleased() && repr.contains("closed"), repr);
        }
    }
}
