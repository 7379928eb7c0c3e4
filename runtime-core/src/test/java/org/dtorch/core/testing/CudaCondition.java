package org.dtorch.core.testing;

import org.dtorch.core.device.Cuda;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;

/** Runs {@link GpuTest}s only where {@link Cuda#isAvailable()}; elsewhere disables them with the reason and the fix. */
public final class CudaCondition implements ExecutionCondition {

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        if (Cuda.isAvailable()) {
            return ConditionEvaluationResult.enabled("CUDA is available: " + Cuda.deviceCount() + " device(s)");
        }
        return ConditionEvaluationResult.disabled(GpuSkipReport.SKIP_PREFIX + Cuda.unavailableReason());
    }
}
