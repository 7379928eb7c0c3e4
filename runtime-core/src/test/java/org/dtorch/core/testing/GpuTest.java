package org.dtorch.core.testing;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A test (class or method) that needs a CUDA device: tagged {@code gpu}, and skipped with the reason where
 * CUDA is not available ({@link CudaCondition}); the skips are counted and reported once at the end of the
 * run ({@link GpuSkipReport}), never passed silently.
 */
@Target({ElementType.TYPE, ElementType.METHOD})
@Retention(RetentionPolicy.RUNTIME)
@Tag("gpu")
@ExtendWith(CudaCondition.class)
public @interface GpuTest {
}
