package org.dtorch.core.communication.promise;

import org.dtorch.core.shm.SharedRegion;

/** Names are removed in the background once a future read its value: wait for that, with a deadline. */
final class ShmWait {

    private ShmWait() {
    }

    /** True once region {@code name} no longer exists (within 5 s). */
    static boolean gone(String name) {
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (SharedRegion.exists(name)) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.onSpinWait();
            Thread.yield();
        }
        return true;
    }
}
