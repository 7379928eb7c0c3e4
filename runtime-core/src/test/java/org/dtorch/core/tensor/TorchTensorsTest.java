package org.dtorch.core.tensor;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/** A dtype's canonical constant from the table is the one libtorch's enum finds itself: for every constant, by its code, and a tensor's. */
class TorchTensorsTest {

    @Test
    void shouldGiveTheConstantInternGives() {
        for (ScalarType t : ScalarType.values()) {
            assertSame(t.intern(), TorchTensors.canonical(t), t.name());
            assertSame(t.intern(), TorchTensors.ofCode(t.value), t.name() + " by its code");
        }
        assertNull(TorchTensors.ofCode(-1));
        assertNull(TorchTensors.ofCode(1 << 20));
        try (Tensor ones = torch.ones(2); Tensor x = ones.to(ScalarType.BFloat16)) {
            assertSame(ScalarType.BFloat16, TorchTensors.dtype(x), "a native call's dtype");
        }
    }
}
