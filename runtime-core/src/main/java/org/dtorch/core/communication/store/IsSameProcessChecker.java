package org.dtorch.core.communication.store;

import java.util.Arrays;

/**
 * Tells whether every participant of a store lives in this process (DTorch's
 * {@code IsSameProcessChecker}): each rank records its process id in shared memory, waits for the others,
 * and compares. All ranks get the same answer, so they pick the same backend.
 *
 * <p>Thread-safe: stateless; every participant calls {@link #allInThisProcess} at about the same time.
 */
public final class IsSameProcessChecker {
    private static final String SUFFIX = "#same-process-check";

    private IsSameProcessChecker() {
    }

    /**
     * Meets the other participants of {@code info}'s store (a barrier, through a File store of its own)
     * and returns true if all of them are in this process.
     */
    public static boolean allInThisProcess(TensorStoreCreateInfo info) {
        TensorStoreCreateInfo probe = info.toBuilder().type(TensorStoreType.FILE).storeKey(info.storeKey() + SUFFIX).build();
        try (FileTensorStore store = new FileTensorStore(probe)) {
            int[] pids = store.participantPids();
            return Arrays.stream(pids).allMatch(pid -> pid == pids[info.rank()]);
        }
    }
}
