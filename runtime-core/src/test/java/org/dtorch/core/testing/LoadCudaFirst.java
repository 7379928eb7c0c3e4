package org.dtorch.core.testing;

import org.dtorch.core.device.Cuda;
import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;

/**
 * Loads libtorch's CUDA natives (when the build has them) before any test class touches a tensor: libtorch
 * decides once per process whether it has CUDA ({@link Cuda}). Registered through {@code META-INF/services}.
 */
public final class LoadCudaFirst implements LauncherSessionListener {

    @Override
    public void launcherSessionOpened(LauncherSession session) {
        Cuda.loadNatives();
    }
}
