package org.dtorch.ops.difftest;

import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.distributed.DeviceMesh;

/**
 * One statement of a {@link Program}: it reads values the program made before it (by number) and makes new ones, or
 * writes into the first value it reads. Each step runs two ways: through the runtime on distributed tensors
 * ({@link #run}) and through libtorch on whole tensors on one device ({@link #reference}); and it prints itself as one
 * Python statement of either kind ({@link #python}), for the reproduction script.
 *
 * <p>Immutable values. Thread-safe.
 */
public sealed interface Step permits Source, AtenStep, MethodStep, Move, Write {
    /** The numbers of the values this step reads, in order. */
    int[] reads();

    /** How many values this step makes (0 for an in-place write). */
    int outputs();

    /** This step reading {@code reads} instead (a shrunk program renumbers its values). */
    Step withReads(int[] reads);

    /** The step on the runtime: the new values (none for a write, which changes {@code in.get(0)}). */
    List<DTensor> run(DTorch dt, List<DeviceMesh> meshes, List<DTensor> in);

    /** The step in libtorch on whole tensors: new tensors the caller owns (none for a write, which changes {@code in.get(0)}). */
    List<Tensor> reference(List<Tensor> in);

    /**
     * The step as a Python statement over the variables {@code in} (read) and {@code out} (made): with the {@code dtorch}
     * package on distributed tensors, or with {@code torch} on whole ones.
     */
    String python(List<String> in, List<String> out, boolean distributed);

    /** True when an output may share memory with an input (a view, a cast or move that may return its input). */
    default boolean aliases() {
        return false;
    }

    /** True for an in-place write into the first value read. */
    default boolean writes() {
        return false;
    }
}
