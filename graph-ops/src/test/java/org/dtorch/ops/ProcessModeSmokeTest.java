package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.distributed.DeviceMesh;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Tag("multiprocess")
@Timeout(120)
class ProcessModeSmokeTest {

    /** On {@link SharedWorkerProcesses}' runtime: the test only issues operators, and closes what it made. */
    @Test
    void shouldAddShardedTensorsInWorkerProcesses() {
        DTorch dt = SharedWorkerProcesses.runtime();
        try (DTensor a = dt.arange(0, 8, 1, org.bytedeco.pytorch.global.torch.ScalarType.Float, dt.defaultMesh(), Placement.shard(0));
             DTensor b = dt.full(10, new long[] {8}, dt.defaultMesh(), Placement.shard(0));
             DTensor c = a.add(b).mul(2.0)) {
            try (Tensor result = c.toTorch()) {
                assertEquals("[20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]", TorchTensors.format(result, 100));
            }
            try (Tensor total = c.sum().toTorch()) {
                assertEquals(216.0, total.item_double());
            }
        }
        // A client tensor larger than a control frame carries crosses through shared memory.
        try (Tensor host = org.bytedeco.pytorch.global.torch.rand(new long[] {512, 512});
             DTensor big = dt.tensor(host, dt.defaultMesh(), Placement.shard(1));
             Tensor back = big.redistribute(Placement.replicate()).toTorch()) {
            assertEquals(true, host.equal(back), "a 1 MiB tensor must come back unchanged");
        }
        dt.sync();
    }

    /** A small tensor-parallel MLP with a loss, formatted; the same program for every mode. */
    static String mlp(DTorch dt) {
        DeviceMesh mesh = dt.initDeviceMesh(new int[] {2, 2}, "dp", "tp");
        DTensor x = dt.randn(1, new long[] {8, 16}, mesh, Placement.shard(0), Placement.replicate());
        DTensor w1 = dt.randn(2, new long[] {32, 16}, mesh, Placement.replicate(), Placement.shard(0));
        DTensor w2 = dt.randn(3, new long[] {16, 32}, mesh, Placement.replicate(), Placement.shard(1));
        DTensor h = dt.linear(x, w1).gelu();
        DTensor y = dt.linear(h, w2).redistribute(Placement.shard(0), Placement.replicate());
        DTensor loss = y.mul(y).mean();
        try (Tensor a = y.toTorch(); Tensor b = loss.toTorch()) {
            return TorchTensors.format(a, 1000) + " " + TorchTensors.format(b, 1);
        }
    }

    @Test
    void shouldGiveTheSameResultsBitForBitAsThreadMode() {
        List<String> results = new ArrayList<>();
        for (boolean processes : new boolean[] {false, true}) {
            for (boolean sameDevice : new boolean[] {false, true}) {
                if (processes && !sameDevice) { // the shared worker processes: the program only issues operators
                    results.add(mlp(SharedWorkerProcesses.runtime()));
                    continue;
                }
                try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(processes).sameDevice(sameDevice)
                    .timeout(Duration.ofSeconds(30)).build())) {
                    results.add(mlp(dt));
                }
            }
        }
        assertEquals(1, results.stream().distinct().count(), "threads, processes, and the same-device simulation of each: " + results);
    }
}
