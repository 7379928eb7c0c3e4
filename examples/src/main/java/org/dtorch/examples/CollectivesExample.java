package org.dtorch.examples;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.communication.group.ThreadGroup;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.tensor.BalancedSplit;
import org.dtorch.core.tensor.TorchTensors;

/**
 * Four CPU ranks, each a thread of this JVM, do an all-reduce and an uneven all-gather through one
 * {@link ThreadGroupManager}, over c10d Gloo. Run it with the examples module's command and
 * {@code -Dexample.main=org.dtorch.examples.CollectivesExample} (docs/getting-started.md, "Java").
 */
public final class CollectivesExample {
    private static final int WORLD = 4;
    private static final long ROWS = 10; // 10 over 4 ranks: shards of 3, 3, 2, 2 rows

    private CollectivesExample() {
    }

    public static void main(String[] args) throws Exception {
        List<Long> devices = List.of(0L, 1L, 2L, 3L);
        ExecutorService threads = Executors.newFixedThreadPool(WORLD);
        try (ThreadGroupManager manager = new ThreadGroupManager(false)) {
            List<Future<String>> reports = new ArrayList<>();
            for (int rank = 0; rank < WORLD; rank++) {
                long device = devices.get(rank);
                reports.add(threads.submit(() -> runRank(manager, devices, device)));
            }
            for (Future<String> report : reports) {
                System.out.println(report.get(120, TimeUnit.SECONDS));
            }
        } finally {
            threads.shutdownNow();
        }
    }

    private static String runRank(ThreadGroupManager manager, List<Long> devices, long device) {
        ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, devices, device);
        int rank = group.getRank();
        StringBuilder out = new StringBuilder("rank " + rank + " (cpu:" + device + ", " + group.backendName() + ")\n");
        try (TensorOptions floats = new TensorOptions().dtype(new ScalarTypeOptional(torch.ScalarType.Float));
             Tensor mine = torch.full(new long[] {2, 3}, new Scalar(rank + 1.0), floats);
             Tensor sum = group.allReduce(mine)) {
            out.append(line("all-reduce of full(rank + 1):", TorchTensors.format(sum, 16)));
        }
        long rows = BalancedSplit.size(ROWS, WORLD, rank);
        long first = BalancedSplit.offset(ROWS, WORLD, rank);
        try (Tensor range = torch.arange(new Scalar(first), new Scalar(first + rows));
             Tensor shard = range.reshape(rows, 1).to(torch.ScalarType.Long);
             Tensor gathered = group.allGatherIntoTensor(shard, ROWS);
             Tensor flat = gathered.reshape(-1)) {
            out.append(line("my shard, rows " + first + ".." + (first + rows - 1) + ":", TorchTensors.format(shard, 16)));
            out.append(line("uneven all-gather (3, 3, 2, 2 rows):", TorchTensors.format(flat, 16)));
        }
        return out.toString().stripTrailing();
    }

    private static String line(String label, String value) {
        return String.format("  %-38s %s%n", label, value);
    }
}
