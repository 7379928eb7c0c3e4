package org.dtorch.polyglot;

import java.util.Arrays;
import java.util.Objects;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.runtime.RuntimeOptions;

/**
 * The device ids a Python {@code DeviceMesh(device_type, mesh)} names, as the runtime's logical devices
 * {@code 0..n-1}, so that a program's meshes mean the same devices on every runtime.
 *
 * <ul>
 *   <li>Distinct ids are logical device ids, unchanged, on every kind of runtime: {@code [[0, 1], [2, 3]]}.</li>
 *   <li>On a same-device CUDA runtime ({@code --devices cuda:N --same-device}), where every logical device runs on
 *       {@code cuda:0}, a mesh may also repeat that GPU's index for every rank, as a user who thinks in GPUs writes
 *       it: {@code [[0, 0], [0, 0]]} is four ranks on {@code cuda:0}. They become the logical devices {@code 0..n-1}
 *       in row-major order, so that mesh is {@code init_device_mesh("cuda", (2, 2))}.</li>
 *   <li>Any other repetition is refused with what to write instead: a mix ({@code [[0, 0], [1, 1]]}) would say some
 *       ranks share a GPU and others do not, which the runtime cannot run; repeating another index names a GPU the
 *       runtime does not use; repeating ids on CUDA without {@code --same-device} needs that flag. On CPU a repeated
 *       id is refused by {@link org.dtorch.core.distributed.DeviceMesh} as before.</li>
 * </ul>
 *
 * <p>Thread-safe: stateless.
 */
final class MeshIds {
    private MeshIds() {
    }

    /**
     * The logical ids for {@code ids} (row-major) of a mesh of {@code kind} on a runtime set up as {@code options};
     * {@code ids} itself when they need no mapping (including ids {@code DeviceMesh} will refuse, such as negative
     * ones, so that its message stays the one users see).
     *
     * @throws IllegalArgumentException for repeated ids the runtime cannot map, naming the accepted forms
     */
    static long[] logical(DeviceKind kind, long[] ids, RuntimeOptions options) {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(options, "options");
        if (kind != DeviceKind.CUDA || ids.length < 2 || Arrays.stream(ids).distinct().count() == ids.length
            || Arrays.stream(ids).anyMatch(id -> id < 0)) {
            return ids;
        }
        String mesh = "DeviceMesh('cuda', " + Arrays.toString(ids) + ")";
        if (!options.sameDevice()) {
            throw new IllegalArgumentException(mesh + ": repeated device ids put several ranks on one GPU, which needs the "
                + "same-device runtime (./dtorch run --devices cuda:" + options.deviceCount() + " --same-device, or "
                + "DTorchOptions sameDevice(true)); without it a mesh names distinct devices 0.." + (options.deviceCount() - 1)
                + ", one GPU each");
        }
        boolean allZero = Arrays.stream(ids).allMatch(id -> id == 0);
        if (!allZero) {
            throw new IllegalArgumentException(mesh + ": with --same-device every rank runs on cuda:0, so a mesh either "
                + "repeats 0 for every rank ([[0, 0], [0, 0]]: ranks 0..n-1 on cuda:0) or names the logical devices 0.."
                + (options.deviceCount() - 1) + " once each");
        }
        if (ids.length > options.deviceCount()) {
            throw new IllegalArgumentException(mesh + " puts " + ids.length + " ranks on cuda:0, but the runtime has "
                + options.deviceCount() + " devices; start it with --devices cuda:" + ids.length + " --same-device");
        }
        long[] logical = new long[ids.length];
        for (int i = 0; i < logical.length; i++) {
            logical[i] = i;
        }
        return logical;
    }

    /**
     * Why a mesh of {@code kind} cannot live on a runtime of {@code options}, naming the launcher flag that starts
     * a runtime of that kind; null when the kinds match, and for a CPU mesh on a CUDA runtime, which is the host
     * memory of its workers (what runs there is the runtime's to refuse).
     */
    static String kindMismatch(DeviceKind kind, RuntimeOptions options) {
        if (kind == options.deviceKind() || kind == DeviceKind.CPU) {
            return null; // a CPU mesh on a CUDA runtime is the host memory of its workers, as in Java
        }
        return "a 'cuda' mesh needs a runtime of CUDA devices, but this runtime has " + options.deviceCount() + " "
            + options.deviceKind().shortName() + " devices: start it with ./dtorch run --devices cuda:N --same-device "
            + "script.py (N ranks on one GPU) or --devices cuda:N (one GPU each), in Java DTorchOptions.builder().devices(\"cuda:N\")";
    }
}
