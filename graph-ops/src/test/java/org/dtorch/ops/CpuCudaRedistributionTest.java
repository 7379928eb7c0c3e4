package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A CPU mesh of a runtime on CUDA is the host memory of the same workers: tensors move CUDA
 * mesh -> CPU mesh -> CUDA mesh with {@code redistribute} and {@code copy_} under several placement pairs, each
 * value compared with torch's and each shard's device checked ({@link TestOps.RequireDevice}). Four ranks on
 * {@code cuda:0}.
 */
@GpuTest
@Timeout(300)
class CpuCudaRedistributionTest {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    private static final Placement P = Placement.partial();
    private static DTorch dt;
    private static DeviceMesh gpus;
    private static DeviceMesh hosts;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).build());
        gpus = dt.defaultMesh();
        hosts = dt.mesh(DeviceKind.CPU, 0, 1, 2, 3);
    }

    @AfterAll
    static void stop() {
        dt.close();
    }

    private static Tensor reference(long... shape) {
        long numel = Arrays.stream(shape).reduce(1, (a, b) -> a * b);
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, Device.cpu(0));
             Tensor flat = torch.arange(new org.bytedeco.pytorch.Scalar(numel), options)) {
            return flat.reshape(shape);
        }
    }

    /** {@code t}, after checking that every shard is on {@code where}; its value compared with {@code expected}. */
    private static String check(String step, Tensor expected, DTensor t, String where) {
        DTensor checked = dt.apply(new TestOps.RequireDevice(where), t);
        try (Tensor actual = checked.toTorch()) {
            String problem = OperatorsTest.compare(expected, actual);
            return problem == null ? null : step + ": " + problem;
        } finally {
            checked.close();
        }
    }

    @Test
    void shouldMoveFromCudaToHostAndBackUnderEachPlacementPair() {
        List<Placement[]> pairs = List.of(new Placement[] {S0, R}, new Placement[] {R, S1}, new Placement[] {P, S0},
            new Placement[] {S0, S0}, new Placement[] {S1, S0}, new Placement[] {R, P}, new Placement[] {P, P});
        List<String> failures = new ArrayList<>();
        for (long[] shape : List.of(new long[] {8, 6}, new long[] {9, 7})) {
            try (Tensor expected = reference(shape)) {
                for (Placement[] pair : pairs) {
                    String name = Arrays.toString(shape) + " " + pair[0] + " on cuda -> " + pair[1] + " on cpu -> " + pair[0] + " on cuda";
                    try (DTensor replicated = dt.tensor(expected, gpus, R); DTensor onGpu = replicated.redistribute(pair[0]);
                         DTensor onHost = onGpu.redistribute(hosts, pair[1]); DTensor back = onHost.redistribute(gpus, pair[0])) {
                        addIfNotNull(failures, check(name + " (host)", expected, onHost, "cpu"));
                        addIfNotNull(failures, check(name + " (back)", expected, back, "cuda:0"));
                    }
                }
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldMoveBetweenMeshesOfOtherIdsAndShapes() {
        DeviceMesh hostPair = dt.mesh(DeviceKind.CPU, 2, 3);
        DeviceMesh gpuSquare = dt.initDeviceMesh(new int[] {2, 2}, "dp", "tp");
        DeviceMesh hostSquare = dt.initDeviceMesh(DeviceKind.CPU, new int[] {2, 2}, "dp", "tp");
        try (Tensor expected = reference(9, 7);
             DTensor onGpu = dt.tensor(expected, gpus, S0);
             DTensor onPair = onGpu.redistribute(hostPair, S1);
             DTensor square = onPair.redistribute(gpuSquare, S0, S1);
             DTensor hostSquared = square.redistribute(hostSquare, R, S0);
             DTensor back = hostSquared.redistribute(gpus, P)) {
            List<String> failures = new ArrayList<>();
            addIfNotNull(failures, check("cuda [0..3] S(0) -> cpu [2, 3] S(1)", expected, onPair, "cpu"));
            addIfNotNull(failures, check("-> cuda 2x2 [S(0), S(1)]", expected, square, "cuda:0"));
            addIfNotNull(failures, check("-> cpu 2x2 [R, S(0)]", expected, hostSquared, "cpu"));
            addIfNotNull(failures, check("-> cuda [0..3] P", expected, back, "cuda:0"));
            assertEquals(List.of(), failures);
        }
    }

    @Test
    void shouldCopyAcrossKindsIntoExistingTensors() {
        try (Tensor expected = reference(8, 6);
             DTensor source = dt.tensor(expected, gpus, S0);
             DTensor hostCopy = dt.zeros(new long[] {8, 6}, hosts, S1);
             DTensor gpuCopy = dt.zeros(new long[] {8, 6}, gpus, R)) {
            hostCopy.copy_(source);
            gpuCopy.copy_(hostCopy);
            assertEquals(null, check("copy_ cuda S(0) into cpu S(1)", expected, hostCopy, "cpu"));
            assertEquals(null, check("copy_ cpu S(1) into cuda R", expected, gpuCopy, "cuda:0"));
        }
    }

    @Test
    void shouldMakeFactoriesAndTensorsOfACpuMeshOnTheHost() {
        try (Tensor expected = reference(8, 6);
             DTensor fromData = dt.tensor(expected, hosts, S0);
             DTensor drawnOnHost = dt.randn(7, new long[] {8, 6}, hosts, S1);
             DTensor drawnOnGpu = dt.randn(7, new long[] {8, 6}, gpus, S1);
             Tensor gpuDraw = drawnOnGpu.toTorch();
             DTensor ones = dt.ones(new long[] {8, 6}, hosts, R);
             Tensor onesExpected = torch.ones(new long[] {8, 6})) {
            assertEquals(null, check("tensor() on the cpu mesh", expected, fromData, "cpu"));
            assertEquals(null, check("randn on the cpu mesh equals randn on the cuda mesh", gpuDraw, drawnOnHost, "cpu"));
            assertEquals(null, check("ones on the cpu mesh", onesExpected, ones, "cpu"));
        }
    }

    @Test
    void shouldRefuseOtherOperatorsOnACpuMeshOfACudaRuntime() {
        try (DTensor onHost = dt.ones(new long[] {8, 6}, hosts, S0)) {
            IllegalArgumentException add = assertThrows(IllegalArgumentException.class, () -> onHost.add(onHost));
            assertTrue(add.getMessage().contains("host memory of this runtime's cuda workers"), add.getMessage());
            IllegalArgumentException hostToHost = assertThrows(IllegalArgumentException.class,
                () -> onHost.redistribute(dt.mesh(DeviceKind.CPU, 0, 1), R));
            assertTrue(hostToHost.getMessage().contains("redistribute the tensor to a cuda mesh first"), hostToHost.getMessage());
            // the refused operators left the runtime working
            try (Tensor sum = onHost.redistribute(gpus, S0).sum().toTorch()) {
                assertEquals(48.0, sum.item_double());
            }
        }
    }

    private static void addIfNotNull(List<String> failures, String problem) {
        if (problem != null) {
            failures.add(problem);
        }
    }
}
