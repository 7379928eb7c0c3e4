package org.dtorch.core.communication.promise;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.shm.CudaIpcTensors;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.ChildJvm;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * File promises carrying CUDA tensors: completed in another JVM (lent through CUDA IPC, waited for, and given
 * back to the lender once the future's side let it go), and within one process (the lender's own address).
 */
@GpuTest
@Tag("multiprocess")
@Timeout(240)
class FilePromiseCudaProcessTest {
    private static final Device GPU = Device.cuda(0);

    @Test
    void shouldCarryACudaTensorFromAnotherJvmAndGiveItBackOnceReleased() throws Exception {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.FILE);
        TensorFuture future = promise.getFuture();
        long opened = CudaIpcTensors.mappingsOpened();
        int views = CudaIpcTensors.liveViewCount();
        try (ChildJvm child = ChildJvm.start("promise-cuda-child", PromiseCudaChild.class, Map.of(), promise.serialize())) {
            try (Tensor value = future.get(); Tensor host = value.cpu(); TensorOptions cpu = TorchTensors.options(ScalarType.Float, Device.cpu(0));
                 Tensor expected = torch.arange(new Scalar(4096 + PromiseCudaChild.PASSES),
                     new Scalar(4096 + PromiseCudaChild.PASSES + PromiseCudaChild.VALUE_NUMEL), cpu)) {
                assertTrue(value.is_cuda(), "the value stays on the GPU");
                assertTrue(torch.equal(expected, host), "the lender's last writes, at the view's offset: " + TorchTensors.format(host, 8));
            }
            assertEquals("SET 1", child.awaitLine("SET", Duration.ofSeconds(90)), "the lender holds the value while the future may read it");
            assertEquals(1, CudaIpcTensors.mappingsOpened() - opened);
            future = null; // the future's view goes with it: then the lender may free the value
            promise = null;
            awaitReleased(child);
            child.awaitSuccess(Duration.ofSeconds(30));
        }
        assertEquals(views, CudaIpcTensors.liveViewCount(), "views of lent memory left alive");
    }

    @Test
    void shouldCarryACudaTensorWithinOneProcess() throws Exception {
        TensorPromise promise = TensorPromises.create(TensorPromiseType.FILE);
        TensorFuture future = promise.getFuture();
        long opened = CudaIpcTensors.mappingsOpened();
        int loans = CudaIpcTensors.liveLoanCount();
        try (TensorOptions options = TorchTensors.options(ScalarType.Float, GPU);
             Tensor value = torch.full(new long[] {3, 1000}, new Scalar(7.0), options); Tensor rows = value.narrow(0, 1, 2)) {
            promise.setValue(rows);
            assertEquals(loans + 1, CudaIpcTensors.liveLoanCount());
            try (Tensor got = future.get(); Tensor sum = got.sum()) {
                assertTrue(got.is_cuda());
                assertEquals(7.0 * 2000, sum.item_double());
            }
        }
        assertEquals(opened, CudaIpcTensors.mappingsOpened(), "the lender's own process uses its address");
        future = null;
        promise = null;
        Await.until(() -> {
            System.gc();
            return CudaIpcTensors.liveLoanCount() <= loans;
        }, Duration.ofSeconds(30), "the loan ends once the future is gone");
        assertEquals(loans, CudaIpcTensors.liveLoanCount(), "the loan ends once the future is gone");
    }

    /** Collects until the child says its loan ended: the future's view is freed by the collector. */
    private static void awaitReleased(ChildJvm child) {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            System.gc();
            try {
                child.awaitLine("RELEASED", Duration.ofMillis(200));
                return;
            } catch (AssertionError e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
            }
        }
    }
}
