package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
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

    @Test
    void shouldAddShardedTensorsInWorkerProcesses() {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).timeout(Duration.ofSeconds(30)).build())) {
            DTensor a = dt.arange(0, 8, 1, org.bytedeco.pytorch.global.torch.ScalarType.Float, dt.defaultMesh(), Placement.shard(0));
            DTensor b = dt.full(10, new long[] {8}, dt.defaultMesh(), Placement.shard(0));
            DTensor c = a.add(b).mul(2.0);
            try (Tensor result = c.toTorch()) {
                assertEquals("[20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]", TorchTensors.format(result, 100));
            }
            try (Tensor total = c.sum().toTorch()) {
                assertEquals(216.0, total.item_double());
            }
            dt.sync();
        }
    }
}
