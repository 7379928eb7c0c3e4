package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongFunction;
import java.util.stream.LongStream;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.ReduceOpType;

/** Shared set-up of the collective tests: managers per backend and the torch reference of a reduction. */
final class GroupFixtures {

    /** The two backends, by the flag that selects them. */
    enum Backend {
        GLOO(false), SAME_DEVICE(true);

        final boolean sameDevice;

        Backend(boolean sameDevice) {
            this.sameDevice = sameDevice;
        }
    }

    private GroupFixtures() {
    }

    static ThreadGroupManager manager(Backend backend, Duration timeout) {
        return new ThreadGroupManager(backend.sameDevice, GlobalCommInstanceId.next(), timeout);
    }

    static List<Long> ids(int world) {
        return LongStream.range(0, world).boxed().toList();
    }

    /** The reduction of {@code inputs} computed by torch on the full tensors. */
    static Tensor reference(List<Tensor> inputs, ReduceOpType op) {
        Tensor acc = inputs.getFirst().clone();
        for (Tensor next : inputs.subList(1, inputs.size())) {
            switch (op) {
                case SUM, AVG -> acc.add_(next);
                case PRODUCT -> acc.mul_(next);
                case MAX -> torch.maximum_out(acc, acc, next).close();
                case MIN -> torch.minimum_out(acc, acc, next).close();
            }
        }
        if (op == ReduceOpType.AVG) {
            acc.div_(new org.bytedeco.pytorch.Scalar((double) inputs.size()));
        }
        return acc;
    }

    /** The message of the {@link IllegalArgumentException} that {@code call} must throw. */
    static String rejected(Runnable call) {
        return org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, call::run).getMessage();
    }

    static List<Tensor> perRank(int world, LongFunction<Tensor> make) {
        List<Tensor> list = new ArrayList<>();
        for (int r = 0; r < world; r++) {
            list.add(make.apply(r));
        }
        return list;
    }
}
