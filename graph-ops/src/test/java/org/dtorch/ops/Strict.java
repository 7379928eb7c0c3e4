package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertThrows;

import org.dtorch.api.DTorch;
import org.junit.jupiter.api.function.Executable;

/** Runs a check in the strict mode (no implicit redistribution) of a runtime, and turns the mode back off after it. */
final class Strict {

    private Strict() {
    }

    /** What {@code call} throws in the strict mode of {@code dt}, asserted to be a {@code type}. */
    static <T extends Throwable> T refuses(DTorch dt, Class<T> type, Executable call) {
        boolean before = dt.implicitRedistribution();
        dt.setImplicitRedistribution(false);
        try {
            return assertThrows(type, call);
        } finally {
            dt.setImplicitRedistribution(before);
        }
    }
}
