package org.dtorch.core.communication.channel;

import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.testing.TestTensors;

/**
 * A consumer rank of a channel in a child JVM, for {@link WorkerTensorChannelProcessTest}: attaches, prints
 * {@code READY}, then runs its scenario and prints what the test waits for; exits 0 when its checks passed.
 *
 * <p>Arguments: scenario ({@code consume}: receive and check n refs; {@code consume-and-hang}: the same, then print
 * {@code RESOLVED} and sleep until killed, without closing), instance id, channel name, consumer count, rank, n,
 * and optionally {@code cuda}: the refs carry CUDA tensors, which must come back on {@code cuda:0}.
 */
final class ChannelChild {
    private ChannelChild() {
    }

    /** The tensor the producer publishes as ref {@code sequence}: exact in float32, different per ref. */
    static Tensor payload(long sequence) {
        return TestTensors.pattern(new long[] {4, 33}, ScalarType.Float, sequence * 13, 1_000_003, 0);
    }

    public static void main(String[] args) {
        try {
            boolean cuda = args.length > 6 && args[6].equals("cuda");
            if (cuda) {
                Cuda.loadNatives(); // before any tensor: libtorch decides once whether it has CUDA
            }
            ChannelOptions o = ChannelOptions.of(args[1], args[2], Integer.parseInt(args[3])).withTimeout(Duration.ofSeconds(60));
            int rank = Integer.parseInt(args[4]);
            int n = Integer.parseInt(args[5]);
            try (ChannelConsumer c = WorkerTensorChannel.consumer(o, rank)) {
                System.out.println("READY");
                for (int i = 1; i <= n; i++) {
                    WorkerTensorRef ref = c.receive();
                    try (Tensor expected = payload(ref.sequence()); Tensor got = (Tensor) c.resolve(ref); Tensor host = got.cpu()) {
                        if (ref.sequence() != i || got.is_cuda() != cuda || !TestTensors.same(expected, host)) {
                            throw new AssertionError("rank " + rank + " ref " + ref + ": " + TestTensors.diff(expected, got));
                        }
                    }
                }
                if (args[0].equals("consume-and-hang")) {
                    System.out.println("RESOLVED");
                    Thread.sleep(600_000);
                }
            }
            System.out.println("OK");
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }
}
