package org.dtorch.ops;

import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.testing.GpuTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The generic ATen operator's family walks on a CUDA mesh: four ranks on one GPU with the same-device backend (the
 * single-GPU machine's only multi-rank CUDA mesh). Inputs are made with torch on the host and distributed onto the
 * GPU; results come back to the host and are compared with torch's on the CPU, as in thread mode. cuDNN may compute
 * float32 convolutions in TF32 (libtorch's default), which is not float32's precision: the class turns that off while it
 * runs, as PyTorch's own CUDA tests do when they compare with the CPU.
 */
@GpuTest
@Timeout(600)
class GenericOpsOnCudaTest {
    private static DTorch dt;
    private static boolean tf32;

    @BeforeAll
    static void start() {
        tf32 = torch.globalContext().allowTF32CuDNN();
        torch.globalContext().setAllowTF32CuDNN(false);
        dt = DTorch.init(DTorchOptions.builder().devices("cuda:4").sameDevice(true).build());
    }

    @AfterAll
    static void stop() {
        dt.close();
        torch.globalContext().setAllowTF32CuDNN(tf32);
    }

    @Test
    void shouldRunEveryPointwiseOperatorAndReductionOfTheTableLikeTorch() {
        GenericOpsTest.walkPointwise(dt);
        GenericOpsTest.walkReductions(dt);
    }

    @Test
    void shouldRunEveryConcatSplitOperatorLikeTorch() {
        ConcatSplitOpsTest.walk(dt, 1);
    }

    @Test
    void shouldRunEveryMatrixProductLikeTorch() {
        MatmulOpsTest.walk(dt, new int[][] {{1}, {2}, {4}, {2, 2}}, 1);
    }

    @Test
    void shouldRunEveryViewAndShapeOperatorLikeTorch() {
        ViewOpsTest.walk(dt, new int[][] {{1}, {2}, {4}, {2, 2}});
    }

    @Test
    void shouldRunTheNormalizationEmbeddingAndDropoutFamiliesLikeTorch() {
        NormOpsTest.walk(dt, new int[][] {{1}, {2}, {4}, {2, 2}}, 1);
    }

    @Test
    void shouldRunConvolutionsPoolingInterpolationAndAttentionLikeTorch() {
        ConvolutionOpsTest.walkConvolutions(dt, 1);
        ConvolutionOpsTest.walkPoolingAndInterpolation(dt, 1);
        ConvolutionOpsTest.walkAttention(dt, 2);
    }

    /** Height-sharded convolutions with halo rows exchanged on the same-device CUDA backend, exactly as torch on the CPU. */
    @Test
    void shouldConvolveHeightShardsWithHalosLikeTorch() {
        HaloConvolutionTest.checkHaloCases(dt, true, HaloConvolutionTest.LAYOUTS);
    }
}
