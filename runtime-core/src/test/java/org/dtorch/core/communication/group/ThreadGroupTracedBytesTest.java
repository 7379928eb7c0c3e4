package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.dtorch.core.trace.Trace;
import org.dtorch.core.trace.Tracer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The bytes a traced collective reports for inputs that are not one tensor: {@link ThreadGroup#allReduceSum_} the sum of
 * its tensors, a point-to-point batch what it sends; a barrier 0.
 */
@Timeout(60)
class ThreadGroupTracedBytesTest {

    @Test
    void shouldReportTheBytesOfInPlaceSumsAndOfWhatABatchSends() {
        Map<String, Long> bytes = new TreeMap<>();
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.SAME_DEVICE, Duration.ofSeconds(20))) {
            Tracer.start();
            Trace trace;
            try {
                RankThreads.runAll(2, rank -> {
                    ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(2), rank);
                    try (Tensor a = TestTensors.full(1f, 3);                                   // 12 bytes
                         Tensor b = TestTensors.pattern(new long[] {2, 2}, ScalarType.Double, 0, 7, 0); // 32 bytes
                         Tensor sent = TestTensors.full(2f, 5);                                 // 20 bytes
                         Tensor into = TestTensors.full(0f, 5)) {
                        group.barrier();
                        group.allReduceSum_(a, b);
                        group.batchIsendIrecv(List.of(P2POp.isend(sent, 1 - rank), P2POp.irecv(into, 1 - rank))).await();
                    }
                });
            } finally {
                trace = Tracer.stop();
            }
            trace.keyAverages().stream().filter(r -> r.category().equals("collective"))
                .forEach(r -> bytes.merge(r.name().replaceAll("\\(.*", ""), r.bytes(), Long::sum));
        }
        // Summed over the two ranks; the batch's completion spans (named as the batch) add 0.
        assertEquals(Map.of("allReduceSum_", 2 * (12L + 32), "barrier", 0L, "batchIsendIrecv", 2 * 20L), bytes);
    }
}
