package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A run across two nodes (two JVMs of this machine that share nothing but 127.0.0.1): the same answers as threads. */
@Tag("multinode")
@Timeout(180)
class AcrossNodesSmokeTest {

    @Test
    void shouldComputeAcrossTwoNodesAsThreadsDo() {
        String threads;
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(4).timeout(Duration.ofSeconds(30)).build())) {
            threads = ProcessModeSmokeTest.mlp(dt);
        }
        String instance;
        try (TwoNodes.Run run = TwoNodes.start(2, 2, Duration.ofSeconds(60))) {
            DTorch dt = run.dt();
            instance = dt.runtime().instanceId();
            assertEquals(4, dt.defaultMesh().count());
            DTensor a = dt.arange(0, 8, 1, torch.ScalarType.Float, dt.defaultMesh(), Placement.shard(0));
            DTensor b = dt.full(10, new long[] {8}, dt.defaultMesh(), Placement.shard(0));
            DTensor c = a.add(b).mul(2.0);
            try (Tensor result = c.toTorch(); Tensor total = c.sum().toTorch()) {
                assertEquals("[20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]", TorchTensors.format(result, 100));
                assertEquals(216.0, total.item_double());
            }
            try (Tensor host = torch.rand(new long[] {512, 512})) {
                DTensor big = dt.tensor(host, dt.defaultMesh(), Placement.shard(1));
                try (Tensor back = big.redistribute(Placement.replicate()).toTorch()) {
                    assertTrue(host.equal(back), "a 1 MiB tensor must come back unchanged");
                }
            }
            assertEquals(threads, ProcessModeSmokeTest.mlp(dt), "a 2 x 2 mesh with one node per row, bit for bit as threads");
            IllegalArgumentException channel = assertThrows(IllegalArgumentException.class, () -> dt.channel(dt.mesh(0, 1), dt.mesh(2, 3)));
            assertTrue(channel.getMessage().contains("device 2 of") && channel.getMessage().contains("is on node 1"), channel.getMessage());
            dt.sync();
        }
        assertEquals(java.util.List.of(), TwoNodes.sharedMemoryOf(instance), "the run's shared memory is gone on every node");
    }
}
