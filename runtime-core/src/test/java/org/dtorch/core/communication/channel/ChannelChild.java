package org.dtorch.core.communication.channel;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.TestTensors;

/**
 * A consumer rank of a channel in a child JVM, for {@link WorkerTensorChannelProcessTest}: attaches, prints
 * {@code READY}, then runs its scenario and prints what the test waits for; exits 0 when its checks passed.
 *
 * <p>Arguments: scenario ({@code consume}: receive and check n refs; {@code consume-and-hang}: the same, then print
 * {@code RESOLVED} and sleep until killed, without closing; {@code consume-behind}: CUDA only, before each resolve
 * queue {@value #BEHIND_MATMULS} matmuls on this process's stream, so each copy out runs milliseconds after its ACK
 * was published, and check the n tensors only at the end: a producer that overwrote a slot before the copy out ran
 * shows as a later ref's values), instance id, channel name, consumer count, rank, n, and optionally {@code cuda}: the
 * refs carry CUDA tensors, which must come back on {@code cuda:0}.
 */
final class ChannelChild {
    /** Matmuls of 2048 x 2048 floats queued before each resolve in {@code consume-behind}: several ms on an H200. */
    static final int BEHIND_MATMULS = 20;

    private ChannelChild() {
    }

    /** The tensor the producer publishes as ref {@code sequence}: exact in float32, different per ref. */
    static Tensor payload(long sequence) {
        return TestTensors.pattern(new long[] {4, 33}, ScalarType.Float, sequence * 13, 1_000_003, 0);
    }

    public static void main(String[] args) {
        try {
            boolean cuda = args.length > 6 && args[6].equals("cuda") || args[0].equals("consume-behind");
            if (cuda) {
                Cuda.loadNatives(); // before any tensor: libtorch decides once whether it has CUDA
            }
            ChannelOptions o = ChannelOptions.of(args[1], args[2], Integer.parseInt(args[3])).withTimeout(Duration.ofSeconds(60));
            int rank = Integer.parseInt(args[4]);
            int n = Integer.parseInt(args[5]);
            if (args[0].equals("consume-behind")) {
                consumeBehind(o, rank, n);
                System.out.println("OK");
                System.exit(0);
            }
            try (ChannelConsumer c = WorkerTensorChannel.consumer(o, rank)) {
                System.out.println("READY");
                for (int i = 1; i <= n; i++) {
                    WorkerTensorRef ref = c.receive();
                    try (Tensor expected = payload(ref.sequence()); Tensor got = (Tensor) c.resolve(ref)) {
                        check(rank, i, ref, expected, got, cuda);
                    }
                }
                if (args[0].equals("consume-and-hang")) {
                    System.out.println("RESOLVED");
                    Thread.sleep(600_000); // a consumer that hangs: the test kills it here
                }
            }
            System.out.println("OK");
            System.exit(0);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }

    /** Fails naming the rank, the ref, and the leaf's profile, slot and generation, unless {@code got} is ref {@code i}'s payload. */
    private static void check(int rank, int i, WorkerTensorRef ref, Tensor expected, Tensor got, boolean cuda) {
        try (Tensor host = got.cpu()) {
            if (ref.sequence() != i || got.is_cuda() != cuda || !TestTensors.same(expected, host)) {
                WorkerTensorRef.Leaf leaf = ref.leaves().getFirst();
                throw new AssertionError("rank " + rank + " ref #" + ref.sequence() + " (expected #" + i + ", profile " + leaf.profile()
                    + " slot " + leaf.slot() + " generation " + leaf.generation() + ", on " + (got.is_cuda() ? "cuda" : "cpu") + "): "
                    + TestTensors.diff(expected, host));
            }
        }
    }

    private static void consumeBehind(ChannelOptions o, int rank, int n) {
        List<WorkerTensorRef> refs = new ArrayList<>();
        List<Tensor> got = new ArrayList<>();
        try (ChannelConsumer c = WorkerTensorChannel.consumer(o, rank);
             TensorOptions options = TorchTensors.options(ScalarType.Float, Device.cuda(0));
             Tensor square = torch.ones(new long[] {2048, 2048}, options)) {
            System.out.println("READY");
            for (int i = 1; i <= n; i++) {
                WorkerTensorRef ref = c.receive();
                for (int k = 0; k < BEHIND_MATMULS; k++) {
                    square.matmul(square).close(); // freed to the allocator in stream order: the memory waits for the product
                }
                refs.add(ref);
                got.add((Tensor) c.resolve(ref));
            }
            for (int i = 1; i <= n; i++) {
                try (Tensor expected = payload(i); Tensor t = got.get(i - 1)) {
                    check(rank, i, refs.get(i - 1), expected, t, true);
                }
            }
        }
    }
}
