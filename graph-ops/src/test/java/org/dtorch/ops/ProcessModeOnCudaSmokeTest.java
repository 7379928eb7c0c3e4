package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Per-device-process mode on CUDA: every device a worker JVM on the GPU. Two ranks on {@code cuda:0} (the same-device
 * backend over File stores, CUDA tensors lent between the workers through CUDA IPC), and one rank on NCCL.
 */
@GpuTest
@Tag("multiprocess")
@Timeout(300)
class ProcessModeOnCudaSmokeTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    @Test
    void shouldRunFactoriesMatmulAndRedistributionInWorkerProcessesOnOneGpu() {
        DTorch dt = DTorch.init(DTorchOptions.builder().devices("cuda:2").sameDevice(true).perDevicePerProcess(true).timeout(TIMEOUT).build());
        try {
            Map<Long, Long> pids = dt.runtime().workerPids();
            assertEquals(2, pids.size(), "one worker JVM per device: " + pids);
            assertTrue(pids.values().stream().noneMatch(pid -> pid == ProcessHandle.current().pid()), pids.toString());

            DTensor a = dt.arange(0, 8, 1, ScalarType.Float, dt.defaultMesh(), Placement.shard(0));
            DTensor b = dt.full(10.0, new long[] {8}, dt.defaultMesh(), Placement.shard(0));
            DTensor onGpu = dt.apply(new TestOps.RequireDevice("cuda:0"), a.add(b).mul(2.0));
            try (Tensor result = onGpu.toTorch()) {
                assertEquals("[20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0]", TorchTensors.format(result, 100));
            }
            try (Tensor total = onGpu.sum().toTorch()) { // partial sums, reduced across the two workers
                assertEquals(216.0, total.item_double());
            }

            // matmul of a row-sharded left side by a replicated right side, against torch on the host
            try (Generator g = torch.make_generator_cpu(7); Tensor x = torch.randn(new long[] {8, 16}, new GeneratorOptional(g));
                 Tensor w = torch.randn(new long[] {16, 4}, new GeneratorOptional(g)); Tensor expected = torch.matmul(x, w)) {
                DTensor dx = dt.tensor(x, dt.defaultMesh(), Placement.shard(0));
                DTensor dw = dt.tensor(w, dt.defaultMesh(), Placement.replicate());
                DTensor y = dx.matmul(dw);
                try (Tensor actual = y.redistribute(Placement.replicate()).toTorch()) {
                    assertEquals(null, OperatorsTest.compare(expected, actual));
                }
                // Shard(1) x Shard(0) gives partial sums: the same-device all-reduce writes into each other's outputs
                DTensor partial = dt.tensor(x, dt.defaultMesh(), Placement.shard(1)).matmul(dt.tensor(w, dt.defaultMesh(), Placement.shard(0)));
                assertTrue(partial.placements().getFirst().isPartial(), "expected partial sums, got " + partial.placements());
                try (Tensor actual = partial.redistribute(Placement.replicate()).toTorch()) {
                    assertEquals(null, OperatorsTest.compare(expected, actual));
                }
            }

            // random factories draw on the host from their seed: the same values as a CPU mesh
            try (Tensor gpu = dt.randn(3, new long[] {6, 4}, dt.defaultMesh(), Placement.shard(1)).redistribute(Placement.replicate()).toTorch();
                 DTorch cpu = DTorch.init(DTorchOptions.builder().devices(2).build());
                 Tensor host = cpu.randn(3, new long[] {6, 4}, cpu.defaultMesh(), Placement.shard(1)).toTorch()) {
                assertTrue(host.equal(gpu), "randn on the CUDA workers " + TorchTensors.format(gpu, 8) + " vs cpu " + TorchTensors.format(host, 8));
            }

            // a client tensor larger than a control frame crosses through shared memory, then to the GPU
            try (Tensor host = torch.rand(new long[] {512, 512})) {
                DTensor big = dt.tensor(host, dt.defaultMesh(), Placement.shard(1));
                try (Tensor back = big.redistribute(Placement.replicate()).toTorch()) {
                    assertTrue(host.equal(back), "a 1 MiB tensor must come back unchanged");
                }
            }
            dt.sync();
        } catch (Throwable e) {
            dt.close();
            throw e;
        }
        long start = System.nanoTime();
        dt.close();
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(millis < 5_000, "close() took " + millis + " ms");
    }

    @Test
    void shouldRunOneWorkerProcessOnItsGpuWithNccl() {
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices("cuda:1").perDevicePerProcess(true).timeout(TIMEOUT).build())) {
            assertEquals(1, dt.runtime().workerPids().size());
            DTensor x = dt.apply(new TestOps.RequireDevice("cuda:0"), dt.ones(new long[] {4, 8}, dt.defaultMesh()));
            DTensor y = x.matmul(dt.full(0.5, new long[] {8, 2}, dt.defaultMesh()));
            try (Tensor result = y.toTorch(); Tensor expected = torch.full(new long[] {4, 2}, new org.bytedeco.pytorch.Scalar(4.0))) {
                assertEquals(null, OperatorsTest.compare(expected, result));
            }
            try (Tensor total = y.sum().toTorch()) {
                assertEquals(32.0, total.item_double());
            }
            dt.sync();
        }
    }
}
