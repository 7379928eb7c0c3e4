package org.dtorch.core.kernel;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiFunction;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;

/** Runs one body per device, each on its own thread, with a context whose store namespace is new per call. */
final class MeshRun {
    private static final AtomicLong OPERATIONS = new AtomicLong();
    static final Duration TIMEOUT = Duration.ofSeconds(30);

    private MeshRun() {
    }

    /** A fresh namespace for one operation; every device of the operation must use the same one. */
    static String newOperation() {
        return "test-op" + OPERATIONS.incrementAndGet();
    }

    static KernelContext context(ThreadGroupManager groups, long device, String operation) {
        Device d = new Device(DeviceKind.CPU, Math.toIntExact(device));
        return new KernelContext(d, org.dtorch.core.device.DeviceStream.of(d), groups, operation, TIMEOUT);
    }

    /** Runs {@code body(device, index)} on every device of {@code devices} (deduplicated, sorted); returns results by device. */
    static <T> Map<Long, T> onDevices(List<Long> devices, BiFunction<Long, Integer, T> body) {
        List<Long> sorted = new ArrayList<>(new TreeSet<>(devices));
        List<T> results = RankThreads.run(sorted.size(), Duration.ofSeconds(60), i -> body.apply(sorted.get(i), i));
        Map<Long, T> byDevice = new HashMap<>();
        for (int i = 0; i < sorted.size(); i++) {
            byDevice.put(sorted.get(i), results.get(i));
        }
        return byDevice;
    }
}
