package org.dtorch.core.communication.group;

import static org.dtorch.core.communication.group.GroupFixtures.Backend;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.ParallelConfig;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Pipeline point-to-point on real rank threads over Gloo and the same-device backend, 2 and 3 stages: activations go
 * forward through every stage (each adds its stage number with torch) and gradients come back the same way, blocking
 * or both ways in one batch, in the two pipelines of a {@link ParallelConfig} at once; what every stage receives
 * equals, exactly, the value torch computes on one device; the ends refuse the direction they lack.
 */
@Timeout(60)
class PipelineP2PCommTest {
    private static final long[] SHAPE = {2, 3, 4};

    @ParameterizedTest(name = "{0} stages={1}")
    @CsvSource({"GLOO, 2", "GLOO, 3", "SAME_DEVICE, 2", "SAME_DEVICE, 3"})
    void shouldPassActivationsForwardAndGradientsBackward(Backend backend, int stages) {
        runStages(backend, stages, 4L * (stages - 1), pipe -> {
            int stage = pipe.stage();
            List<String> failed = new ArrayList<>();
            try (Tensor input = TestTensors.pattern(SHAPE, ScalarType.Float, 0, 11, 0);
                 Tensor activation = input.clone(); Tensor gradient = TestTensors.full(-1f, SHAPE)) {
                if (!pipe.isFirstStage()) {
                    pipe.recvForward(activation);
                    expect(failed, "stage " + stage + " recvForward", input, stage * (stage - 1) / 2, activation);
                }
                if (!pipe.isLastStage()) {
                    activation.add_(new Scalar(stage));
                    pipe.sendForward(activation);
                    pipe.recvBackward(gradient);
                    // The last stage sends its activation back; each stage on the way adds 100 times its number.
                    long sum = (long) stages * (stages - 1) / 2 - (stages - 1);
                    long added = 0;
                    for (int s = stage + 1; s < stages - 1; s++) {
                        added += 100L * s;
                    }
                    expect(failed, "stage " + stage + " recvBackward", input, sum + added, gradient);
                } else {
                    gradient.copy_(activation);
                }
                if (!pipe.isFirstStage()) {
                    gradient.add_(new Scalar(pipe.isLastStage() ? 0 : 100L * stage));
                    pipe.sendBackward(gradient);
                }
            }
            return failed;
        });
    }

    @ParameterizedTest(name = "{0} stages={1}")
    @CsvSource({"GLOO, 2", "GLOO, 3", "SAME_DEVICE, 2", "SAME_DEVICE, 3"})
    void shouldSendAndReceiveBothWaysInOneBatch(Backend backend, int stages) {
        runStages(backend, stages, 2L * (stages - 1), pipe -> bothWaysInOneBatch(pipe, Device.cpu(0)));
    }

    /** One stage's exchange in both directions in one batch, on {@code device}; the mismatches found. */
    static List<String> bothWaysInOneBatch(PipelineP2PComm pipe, Device device) {
        int stage = pipe.stage();
        List<String> failed = new ArrayList<>();
        // Stage s sends the activation input + s forward and the gradient input - 10 s backward.
        try (Tensor input = ThreadGroupCollectivesTest.onDevice(TestTensors.pattern(SHAPE, ScalarType.Float, 0, 11, 0), device);
             Tensor activation = input.add(new Scalar(stage)); Tensor gradient = input.sub(new Scalar(10L * stage));
             Tensor fromPrevious = ThreadGroupCollectivesTest.onDevice(TestTensors.full(-1f, SHAPE), device);
             Tensor fromNext = ThreadGroupCollectivesTest.onDevice(TestTensors.full(-1f, SHAPE), device)) {
            if (!pipe.isFirstStage()) {
                pipe.sendBackwardRecvForward(gradient, fromPrevious);
                expect(failed, "stage " + stage + " sendBackwardRecvForward", input, stage - 1, fromPrevious);
            }
            if (!pipe.isLastStage()) {
                pipe.sendForwardRecvBackward(activation, fromNext);
                expect(failed, "stage " + stage + " sendForwardRecvBackward", input, -10L * (stage + 1), fromNext);
            }
        }
        return failed;
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"GLOO", "SAME_DEVICE"})
    void shouldRunInEveryPipelineGroupOfAParallelConfigAtOnce(Backend backend) {
        // pp 2 x tp 2: the pipelines are ranks [0, 2] and [1, 3]; stages are group ranks, not device ids.
        ParallelConfig config = new ParallelConfig(1, 1, 1, 1, 2, 2);
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(config.worldSize(), rank -> {
                List<Long> pipeline = config.ppGroup(rank);
                PipelineP2PComm pipe = new PipelineP2PComm(manager.getThreadGroup(DeviceKind.CPU, pipeline, rank));
                List<String> failed = new ArrayList<>();
                String what = "rank " + rank + " stage " + pipe.stage() + " of " + pipeline;
                // Each pipeline's values start at its first rank; the last stage answers with them plus one.
                try (Tensor input = TestTensors.pattern(SHAPE, ScalarType.Float, pipeline.getFirst(), 11, 0);
                     Tensor answer = input.add(new Scalar(1)); Tensor into = TestTensors.full(-1f, SHAPE)) {
                    if (pipe.isFirstStage()) {
                        pipe.sendForwardRecvBackward(input, into);
                        expect(failed, what, input, 1, into);
                    } else {
                        pipe.sendBackwardRecvForward(answer, into);
                        expect(failed, what, input, 0, into);
                    }
                }
                return failed;
            });
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
        }
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"GLOO", "SAME_DEVICE"})
    void shouldRefuseTheDirectionsTheEndsLack(Backend backend) {
        // Only the last forward sends and receives move anything: 2 calls on each of the 2 links.
        runStages(backend, 3, 4, pipe -> {
            try (Tensor t = TestTensors.full(1f, 2)) {
                if (pipe.isFirstStage()) {
                    assertEquals("PipelineP2PComm.recvForward (stage 0 of 3): the first stage has no previous stage",
                        assertThrows(IllegalStateException.class, () -> pipe.recvForward(t)).getMessage());
                    assertEquals("PipelineP2PComm.sendBackward (stage 0 of 3): the first stage has no previous stage",
                        assertThrows(IllegalStateException.class, () -> pipe.sendBackward(t)).getMessage());
                    assertEquals("PipelineP2PComm.sendBackwardRecvForward (stage 0 of 3): the first stage has no previous stage",
                        assertThrows(IllegalStateException.class, () -> pipe.sendBackwardRecvForward(t, t)).getMessage());
                }
                if (pipe.isLastStage()) {
                    assertEquals("PipelineP2PComm.sendForward (stage 2 of 3): the last stage has no next stage",
                        assertThrows(IllegalStateException.class, () -> pipe.sendForward(t)).getMessage());
                    assertEquals("PipelineP2PComm.recvBackward (stage 2 of 3): the last stage has no next stage",
                        assertThrows(IllegalStateException.class, () -> pipe.recvBackward(t)).getMessage());
                    assertEquals("PipelineP2PComm.sendForwardRecvBackward (stage 2 of 3): the last stage has no next stage",
                        assertThrows(IllegalStateException.class, () -> pipe.sendForwardRecvBackward(t, t)).getMessage());
                }
                // Nothing was sent, so the pipeline still works.
                if (!pipe.isLastStage()) {
                    pipe.sendForward(t);
                }
                if (!pipe.isFirstStage()) {
                    pipe.recvForward(t);
                }
            }
            return List.of();
        });
    }

    /**
     * Runs {@code body} on every stage's thread and asserts that no stage reported a mismatch and that the stages made
     * {@code transfers} point-to-point calls in all.
     */
    private static void runStages(Backend backend, int stages, long transfers, Function<PipelineP2PComm, List<String>> body) {
        try (ThreadGroupManager manager = GroupFixtures.manager(backend, Duration.ofSeconds(20))) {
            List<List<String>> failures = RankThreads.run(stages,
                rank -> body.apply(new PipelineP2PComm(manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(stages), rank))));
            assertEquals(List.of(), failures.stream().flatMap(List::stream).toList());
            assertEquals(transfers, manager.collectiveCounter().count(CollectiveKind.POINT_TO_POINT));
        }
    }

    /** {@code actual} equals torch's {@code input + shift}. */
    private static void expect(List<String> failed, String what, Tensor input, long shift, Tensor actual) {
        try (Tensor expected = input.add(new Scalar(shift))) {
            if (!TestTensors.same(expected, actual)) {
                failed.add(what + ": " + TestTensors.diff(expected, actual));
            }
        }
    }
}
