package org.dtorch.core.communication.group;

import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;

/**
 * For {@link GlooLogTest}: connects a Gloo group of two ranks on two threads of this JVM, runs an all-reduce, then
 * prints a tensor through C++ {@code std::cout} ({@code at::print}) and {@code DONE}.
 */
public final class GlooConnectChild {

    private GlooConnectChild() {
    }

    public static void main(String[] args) {
        try (ThreadGroupManager manager = new ThreadGroupManager(false, GlobalCommInstanceId.next(), Duration.ofSeconds(60))) {
            RankThreads.run(2, Duration.ofSeconds(60), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank);
                try (Tensor ones = torch.ones(3); Tensor sum = group.allReduce(ones, org.dtorch.core.communication.ReduceOpType.SUM)) {
                    return sum.sum().item_double();
                }
            });
            try (Tensor after = torch.arange(new org.bytedeco.pytorch.Scalar(4L))) {
                torch.print(after);
            }
        }
        System.out.flush();
        System.out.println("DONE");
        System.exit(0);
    }
}
