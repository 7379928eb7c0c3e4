package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class PipelineSmokeTest {

    @Test
    void shouldAddShardedTensorsAndReadTheResult() {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).build())) {
            DTensor a = dt.arange(0, 8, 1, org.bytedeco.pytorch.global.torch.ScalarType.Float, dt.defaultMesh(), Placement.shard(0));
            DTensor b = dt.full(10, new long[] {8}, dt.defaultMesh(), Placement.shard(0));
            DTensor c = a.add(b).mul(2.0);
            assertEquals("[S(0)]", c.placements().toString());
            try (Tensor result = c.toTorch()) {
                assertEquals("[20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]", TorchTensors.format(result, 100));
            }
            DTensor s = c.sum();
            assertEquals("[P(sum)]", s.placements().toString());
            try (Tensor total = s.toTorch()) {
                assertEquals(216.0, total.item_double());
                assertArrayEquals(new long[0], TorchTensors.shape(total));
            }
            dt.sync();
        }
    }
}
