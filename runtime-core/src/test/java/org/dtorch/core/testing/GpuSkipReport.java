package org.dtorch.core.testing;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * Counts the tests {@link CudaCondition} skipped and prints one line at the end of the run:
 * {@code no CUDA device: N gpu tests skipped (reason)}. Registered through {@code META-INF/services}.
 */
public final class GpuSkipReport implements TestExecutionListener {
    /** How {@link CudaCondition}'s reasons start, so that this listener recognizes its skips. */
    static final String SKIP_PREFIX = "no CUDA device: ";

    private final AtomicInteger skipped = new AtomicInteger();
    private final AtomicReference<String> reason = new AtomicReference<>();
    private volatile TestPlan plan;

    @Override
    public void testPlanExecutionStarted(TestPlan testPlan) {
        plan = testPlan;
        skipped.set(0);
    }

    @Override
    public void executionSkipped(TestIdentifier identifier, String why) {
        if (why == null || !why.startsWith(SKIP_PREFIX)) {
            return;
        }
        reason.compareAndSet(null, why.substring(SKIP_PREFIX.length()));
        TestPlan current = plan;
        if (identifier.isTest()) {
            skipped.incrementAndGet();
        } else if (current != null) {
            skipped.addAndGet((int) current.getDescendants(identifier).stream().filter(TestIdentifier::isTest).count());
        }
    }

    @Override
    public void executionFinished(TestIdentifier identifier, TestExecutionResult result) {
        // Nothing: only skips are counted.
    }

    @Override
    public void testPlanExecutionFinished(TestPlan testPlan) {
        int count = skipped.getAndSet(0);
        if (count > 0) {
            System.out.println(SKIP_PREFIX + count + " gpu test" + (count == 1 ? "" : "s") + " skipped (" + reason.get() + ")");
        }
    }
}
