package org.dtorch.core.communication.promise;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.testing.ChildJvmLoop;
import org.dtorch.core.testing.ChildMain;

/**
 * Completes Network promises made in the parent JVM, as a worker on another host does:
 * {@code NetworkPromiseChild <value> <error> <void> <sharedStoreValue>}, each a promise's {@code serialize()}.
 */
public final class NetworkPromiseChild {

    private NetworkPromiseChild() {
    }

    public static void main(String[] args) {
        ChildJvmLoop.exitWith(() -> complete(args));
    }

    private static void complete(String[] args) throws Exception {
        TensorPromise value = TensorPromises.fromSerialized(TensorPromiseType.NETWORK, args[0]);
        TensorPromise failing = TensorPromises.fromSerialized(TensorPromiseType.NETWORK, args[1]);
        VoidPromise done = TensorPromises.voidFromSerialized(TensorPromiseType.NETWORK, args[2]);
        TensorPromise shared = TensorPromises.fromSerialized(TensorPromiseType.NETWORK, args[3]);
        System.out.println("ATTACHED");
        ChildMain.awaitParent("GO"); // once the parent's getter is blocked in the store's wait
        try (Tensor v = NetworkPromiseTest.doubles(); Tensor s = NetworkPromiseTest.ints()) {
            value.setValue(v);
            shared.setValue(s);
            failing.setException(new IllegalArgumentException("bad shard on cpu:3"));
            done.setValue();
            // After the parent has read and deleted the value: the claim it leaves still refuses a second one.
            ChildMain.awaitParent("READ");
            try {
                value.setValue(v);
                throw new AssertionError("a second setValue was taken");
            } catch (IllegalStateException expected) {
                System.out.println("SECOND REFUSED " + expected.getMessage());
            }
        }
    }
}
