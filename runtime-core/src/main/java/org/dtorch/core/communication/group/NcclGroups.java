package org.dtorch.core.communication.group;

import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.Store;
import org.bytedeco.pytorch.nccl.ProcessGroupNCCL;

/**
 * Creates c10d's {@code ProcessGroupNCCL}. A class of its own so that {@link C10dRendezvous} links the NCCL
 * classes (whose loading needs libtorch's CUDA natives) only when an NCCL group is made.
 *
 * <p>Thread-safe: stateless.
 */
final class NcclGroups {

    private NcclGroups() {
    }

    /** A new NCCL process group over {@code store}; collectives time out after {@code timeout}. */
    static Backend create(Store store, int rank, int size, Milliseconds timeout) {
        ProcessGroupNCCL pg = new ProcessGroupNCCL(store, rank, size);
        pg.setTimeout(timeout);
        return pg;
    }
}
