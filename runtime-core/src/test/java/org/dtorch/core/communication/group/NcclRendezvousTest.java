package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.store.RendezvousServer;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Test;

/**
 * NCCL groups meeting at a rendezvous rather than in a FileStore, as ranks on several hosts do: one rank per GPU of this
 * machine, up to two (NCCL refuses two ranks on one GPU), each a thread that made its GPU current.
 */
@GpuTest
class NcclRendezvousTest {

    @Test
    void ncclShouldRunEveryCollectiveOverTheRendezvous() {
        int world = Math.min(2, Cuda.deviceCount());
        try (RendezvousServer server = RendezvousServer.start("127.0.0.1", 0);
             ThreadGroupManager groups = new ThreadGroupManager(false, ShmFiles.freshInstance("ncr"), Duration.ofSeconds(60),
                 ThreadGroupManager.Role.WORKER, server.address())) {
            List<List<String>> failures = RankThreads.run(world, Duration.ofSeconds(120),
                rank -> MultiGpuNcclCollectivesTest.onItsGpu(groups, world, rank, (group, gpu) -> {
                    List<String> all = new ArrayList<>();
                    for (ScalarType dtype : List.of(ScalarType.Float, ScalarType.Long)) {
                        all.addAll(ThreadGroupCollectivesTest.runEveryCollective(group, dtype, new long[] {4, 6}, gpu));
                    }
                    if (world > 1) {
                        all.addAll(ThreadGroupP2PTest.runPointToPoint(group, gpu));
                    }
                    return all;
                }));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList(), "world " + world);
        }
    }
}
