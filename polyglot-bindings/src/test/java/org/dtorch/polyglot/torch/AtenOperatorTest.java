package org.dtorch.polyglot.torch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Operators from the dispatcher without Python: overloads chosen by the kinds of the arguments, the varargs rule, the
 * cache of resolved calls, the error naming the schemas, and calls through {@code callBoxed}.
 */
@Timeout(120)
class AtenOperatorTest {
    private final TorchModule module = TorchModule.shared();

    private String schemaFor(String op, String key) {
        return module.op(op).resolve(key).schema();
    }

    @Test
    void shouldPickTheOverloadTheArgumentKindsFit() {
        assertTrue(schemaFor("add", "T,T").startsWith("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)"), schemaFor("add", "T,T"));
        assertTrue(schemaFor("add", "T,i").startsWith("aten::add.Scalar("));
        assertTrue(schemaFor("add", "T,f|alpha=i").startsWith("aten::add.Scalar("));
        assertTrue(schemaFor("add", "T,T|out=T").startsWith("aten::add.out("));
        assertTrue(schemaFor("max", "T,i").startsWith("aten::max.dim("));
        assertTrue(schemaFor("max", "T,T").startsWith("aten::max.other("));
        assertTrue(schemaFor("sum", "T|dim=i").startsWith("aten::sum.dim_IntList("), "an int where int[1]? dim goes");
        assertTrue(schemaFor("softmax", "T,i").startsWith("aten::softmax.int("));
        assertTrue(schemaFor("conv2d", "T,T|padding=s").startsWith("aten::conv2d.padding("));
        assertTrue(schemaFor("conv2d", "T,T|stride=i").startsWith("aten::conv2d("));
    }

    @Test
    void shouldPackTrailingIntsIntoAnIntListThatEndsThePositionals() {
        assertTrue(schemaFor("view", "T,i,i").startsWith("aten::view("));
        assertTrue(schemaFor("zeros", "i,i,i").startsWith("aten::zeros("));
        assertTrue(schemaFor("zeros", "i").startsWith("aten::zeros("));
        PyTensor z = (PyTensor) module.op("zeros").resolve("i,i").call2(2L, 3L);
        assertArrayEquals(new long[] {2, 3}, z.shape());
    }

    @Test
    void shouldResolveAKeyOnce() {
        AtenOperator add = module.op("add");
        assertSame(add.resolve("T,T"), add.resolve("T,T"));
        assertSame(add, module.op("add"));
    }

    @Test
    void shouldNameEverySchemaTriedWhenNoneFits() {
        ArgumentMismatchException e = assertThrows(ArgumentMismatchException.class, () -> module.op("add").resolve("T,s"));
        assertTrue(e.getMessage().contains("got (Tensor, str)"), e.getMessage());
        assertTrue(e.getMessage().contains("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"), e.getMessage());
        assertTrue(e.getMessage().contains("aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor"), e.getMessage());
        assertThrows(ArgumentMismatchException.class, () -> module.op("add").resolve("T,T|beta=i"));
    }

    @Test
    void shouldAnswerNullForAMissingOperator() {
        assertNull(module.op("no_such_operator"));
        assertTrue(module.hasOp("scaled_dot_product_attention"));
    }

    @Test
    void shouldRunOperatorsThroughTheDispatcher() {
        try (PyTensor a = PyTensor.wrap(torch.ones(3)); PyTensor b = PyTensor.wrap(torch.arange(new org.bytedeco.pytorch.Scalar(3L)))) {
            PyTensor sum = (PyTensor) module.op("add").resolve("T,T|alpha=i").call(a, b, 2L);
            assertArrayEquals(new double[] {1, 3, 5}, sum.doubles());
            assertEquals("float32", sum.dtype());
            Object[] max = (Object[]) module.op("max").resolve("T,i").call2(sum, 0L);
            assertEquals(5.0, ((PyTensor) max[0]).doubles()[0]);
            assertArrayEquals(new long[] {2}, ((PyTensor) max[1]).longs());
            assertEquals(9.0, (Double) module.op("item").resolve("T").call1(module.op("sum").resolve("T").call1(sum)));
            assertEquals(3L, module.op("size").resolve("T,i").call2(sum, 0L));
            Object[] parts = (Object[]) module.op("split").resolve("T,i").call2(sum, 2L);
            assertEquals(2, parts.length);
            RuntimeException mismatch = assertThrows(RuntimeException.class,
                () -> module.op("add").resolve("T,T").call2(a, PyTensor.wrap(torch.ones(2))));
            assertTrue(mismatch.getMessage().contains("must match the size"), mismatch.getMessage());
        }
    }

    @Test
    void shouldReleaseAHandleOnCloseUnlessAViewPinsIt() {
        PyTensor t = PyTensor.wrap(torch.ones(4));
        t.pin();
        t.close();
        assertTrue(t.isClosed());
        assertTrue(!t.isReleased(), "a pinned tensor waits for its views");
        assertThrows(IllegalStateException.class, t::doubles);
        assertArrayEquals(new long[] {4}, t.shape(), "a closed handle still says what it was");
        t.unpin();
        assertTrue(t.isReleased());
        t.close(); // idempotent
    }

    @Test
    void shouldRunMultiTensorOperatorsThatReturnNothingWithScalarLists() {
        assertTrue(schemaFor("_foreach_add_", "[T],i").startsWith("aten::_foreach_add_.Scalar("));
        assertTrue(schemaFor("_foreach_mul_", "[T],[f]").startsWith("aten::_foreach_mul_.ScalarList("));
        assertTrue(schemaFor("_foreach_mul_", "[T],[i]").startsWith("aten::_foreach_mul_.ScalarList("));
        PyTensor a = (PyTensor) module.op("ones").resolve("i").call1(2L);
        PyTensor b = (PyTensor) module.op("ones").resolve("i").call1(3L);
        List<PyTensor> both = List.of(a, b);
        assertNull(module.op("_foreach_add_").resolve("[T],i").call2(both, 1L), "a () return is None");
        module.op("_foreach_mul_").resolve("[T],[f]").call2(both, List.of(0.5, 4.0));
        assertArrayEquals(new double[] {1, 1}, a.doubles());
        assertArrayEquals(new double[] {8, 8, 8}, b.doubles());
    }
}
