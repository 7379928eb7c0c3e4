package org.dtorch.core.testing;

import java.util.List;
import java.util.function.Supplier;

/**
 * The end of a child JVM's {@code main} that checks something and reports to its {@link ChildJvm}: prints {@code OK} and
 * exits 0 when the check found no mismatch, else prints {@code FAILED <mismatches>} (or the stack trace of what it threw)
 * and exits 1.
 */
public final class ChildMain {

    private ChildMain() {
    }

    /** Runs {@code check}, which returns its mismatches, reports them and exits the JVM. */
    public static void exitWithMismatches(Supplier<List<String>> check) {
        List<String> failures;
        try {
            failures = check.get();
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            System.exit(1);
            return;
        }
        System.out.println(failures.isEmpty() ? "OK" : "FAILED " + failures);
        System.exit(failures.isEmpty() ? 0 : 1);
    }
}
