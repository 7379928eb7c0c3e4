package org.dtorch.core.kernel;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.core.testing.GpuTest;
import org.dtorch.core.testing.TestTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link ConvertKernel} and {@link CopyKernel} between a CUDA mesh and a CPU mesh of the same four logical devices,
 * all on {@code cuda:0} with the same-device backend: every result shard is on the host or on the GPU
 * as its mesh says, and equals the slice written out from the definition.
 */
@GpuTest
@Timeout(180)
class CrossKindRedistributionTest {
    private static final Device GPU = Device.cuda(0);
    private static final DeviceMesh ON_GPU = DeviceMesh.of(DeviceKind.CUDA, 0, 1, 2, 3);
    private static final DeviceMesh ON_HOST = DeviceMesh.of(DeviceKind.CPU, 0, 1, 2, 3);
    private static final DeviceMesh HOST_PAIR = DeviceMesh.of(DeviceKind.CPU, 2, 3);
    private static ThreadGroupManager groups;

    @BeforeAll
    static void createGroups() {
        groups = new ThreadGroupManager(true, GlobalCommInstanceId.next(), Duration.ofSeconds(60));
    }

    @AfterAll
    static void closeGroups() {
        groups.close();
    }

    private static KernelContext context(long device, String operation) {
        return new KernelContext(new Device(DeviceKind.CUDA, Math.toIntExact(device)), DeviceStream.of(GPU), groups, operation,
            MeshRun.TIMEOUT);
    }

    /** This device's slice of {@code reference} under {@code sharding} (no partials), on its mesh's kind. */
    private static Tensor slice(Tensor reference, long[] shape, Sharding sharding, long device) {
        try (Tensor view = RedistributionMatrixTest.expectedSlice(reference, shape, sharding.mesh(), sharding.placements(), device);
             Tensor dense = view.contiguous()) {
            return TorchTensors.to(dense, sharding.mesh().kind() == DeviceKind.CUDA ? GPU : Device.cpu(0));
        }
    }

    /** Moves {@code reference} from {@code source} to {@code target}; returns the problems found, by device. */
    private static List<String> move(Tensor reference, long[] shape, Sharding source, Sharding target) {
        ConvertKernel convert = ConvertKernel.of(source, target, shape);
        String op = MeshRun.newOperation();
        List<Long> devices = new ArrayList<>(source.mesh().deviceIds());
        devices.addAll(target.mesh().deviceIds());
        Map<Long, String> problems = MeshRun.onDevices(devices, (device, index) -> {
            try (Tensor local = source.mesh().contains(device) ? slice(reference, shape, source, device) : null) {
                Tensor result = convert.run(context(device, op), local);
                if (result == null) {
                    return null;
                }
                try (result; Tensor expected = slice(reference, shape, target, device); Tensor onHost = result.cpu();
                     Tensor expectedOnHost = expected.cpu()) {
                    if (result.is_cuda() != (target.mesh().kind() == DeviceKind.CUDA)) {
                        return "device " + device + " holds " + TorchTensors.describe(result) + " for " + target;
                    }
                    return TestTensors.same(expectedOnHost, onHost) ? null : "device " + device + ": " + TestTensors.diff(expectedOnHost, onHost);
                }
            }
        });
        return problems.values().stream().filter(p -> p != null).map(p -> source + " -> " + target + ": " + p).toList();
    }

    @Test
    void shouldMoveToTheHostAndBackUnderEachPlacementPair() {
        List<Placement[]> pairs = List.of(new Placement[] {Placement.shard(0), Placement.replicate()},
            new Placement[] {Placement.replicate(), Placement.shard(1)}, new Placement[] {Placement.shard(0), Placement.shard(0)},
            new Placement[] {Placement.shard(1), Placement.shard(0)});
        List<String> failures = new ArrayList<>();
        for (long[] shape : List.of(new long[] {8, 6}, new long[] {9, 7})) {
            try (Tensor reference = TestTensors.pattern(shape, ScalarType.Float, 0, 37, 0)) {
                for (Placement[] pair : pairs) {
                    failures.addAll(move(reference, shape, Sharding.of(ON_GPU, pair[0]), Sharding.of(ON_HOST, pair[1])));
                    failures.addAll(move(reference, shape, Sharding.of(ON_HOST, pair[1]), Sharding.of(ON_GPU, pair[0])));
                }
                failures.addAll(move(reference, shape, Sharding.of(ON_GPU, Placement.shard(0)), Sharding.of(HOST_PAIR, Placement.shard(1))));
                failures.addAll(move(reference, shape, Sharding.of(HOST_PAIR, Placement.shard(1)), Sharding.of(ON_GPU, Placement.shard(0))));
            }
        }
        assertEquals(List.of(), failures);
    }

    @Test
    void shouldCopyFromTheHostIntoGpuTensors() {
        long[] shape = {9, 7};
        Sharding source = Sharding.of(ON_HOST, Placement.shard(1));
        Sharding destination = Sharding.of(ON_GPU, Placement.shard(0));
        CopyKernel copy = new CopyKernel(destination, source, shape);
        String op = MeshRun.newOperation();
        try (Tensor reference = TestTensors.pattern(shape, ScalarType.Float, 0, 37, 0)) {
            Map<Long, String> problems = MeshRun.onDevices(ON_GPU.deviceIds(), (device, index) -> {
                try (Tensor local = slice(reference, shape, source, device); Tensor expected = slice(reference, shape, destination, device);
                     Tensor into = org.bytedeco.pytorch.global.torch.zeros_like(expected)) {
                    copy.run(context(device, op), into, local);
                    try (Tensor got = into.cpu(); Tensor want = expected.cpu()) {
                        return into.is_cuda() && TestTensors.same(want, got) ? null : "device " + device + ": " + TestTensors.diff(want, got);
                    }
                }
            });
            assertEquals(List.of(), problems.values().stream().filter(p -> p != null).toList(), Arrays.toString(shape));
        }
    }
}
