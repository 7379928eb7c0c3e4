package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The runtime's close stays bounded with an edge open whose destination device is stuck, and removes the channel. */
@Timeout(60)
class ChannelEdgeShutdownTest {

    @Test
    void shouldCloseAnOpenEdgeWithinTheShutdownTimeoutWhileItsDestinationIsStuck(@TempDir Path tmp) {
        DTorch dt = TestOps.twoDevices(false, Duration.ofSeconds(30));
        String instance = dt.runtime().instanceId();
        DeviceMesh src = dt.mesh(0);
        DeviceMesh dst = dt.mesh(1);
        dt.channel(src, dst);
        DTensor held = dt.zeros(new long[] {2}, dst);
        DTensor x = dt.arange(0, 4, 1, torch.ScalarType.Long, src, Placement.replicate());
        dt.sync(); // both devices past libtorch's first load, so that only the gate holds device 1
        DTensor stuck = dt.apply(new TestOps.Gate(tmp.resolve("never").toString(), 30_000), held);
        DTensor moved = x.redistribute(dst, Placement.shard(0));
        long start = System.nanoTime();
        dt.close();
        long millis = (System.nanoTime() - start) / 1_000_000;
        // Generous for a loaded machine, yet half the time the destination stays stuck.
        assertTrue(millis < 15_000, "close took " + millis + " ms while the destination was stuck for 30 s");
        assertEquals(List.of(), ChannelEdgeTest.channelFiles(instance), "the channel's files are removed");
        List.of(held, stuck, x, moved).forEach(DTensor::close);
    }
}
