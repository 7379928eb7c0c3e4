package org.dtorch.core.communication.promise;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.testing.ChildMain;
import org.dtorch.core.testing.TestTensors;

/**
 * Completes File promises created in the parent JVM, as a worker does:
 * {@code PromiseChild <largeValueName> <errorName> <voidName> <emptyValueName>}; the last gets a value with no element.
 */
public final class PromiseChild {

    private PromiseChild() {
    }

    public static void main(String[] args) throws Exception {
        try {
            TensorPromise large = TensorPromises.fromSerialized(TensorPromiseType.FILE, args[0]);
            TensorPromise failing = TensorPromises.fromSerialized(TensorPromiseType.FILE, args[1]);
            VoidPromise done = TensorPromises.voidFromSerialized(TensorPromiseType.FILE, args[2]);
            TensorPromise empty = TensorPromises.fromSerialized(TensorPromiseType.FILE, args[3]);
            System.out.println("ATTACHED");
            ChildMain.awaitParent("GO"); // once the parent's getter sleeps on the futex
            try (Tensor value = TestTensors.full(8f, 1 << 20)) {
                large.setValue(value);
            }
            try (Tensor nothing = TestTensors.pattern(new long[] {0, 5}, org.bytedeco.pytorch.global.torch.ScalarType.Float, 0, 1, 0)) {
                empty.setValue(nothing);
            }
            failing.setException(new IllegalArgumentException("bad shard on cpu:3"));
            done.setValue();
            System.out.println("OK");
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }
}
