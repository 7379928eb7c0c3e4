package org.dtorch.core.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.Supplier;

/**
 * The end of a child JVM's {@code main} that checks something and reports to its {@link ChildJvm}: prints {@code OK} and
 * exits 0 when the check found no mismatch, else prints {@code FAILED <mismatches>} (or the stack trace of what it threw)
 * and exits 1. {@link #awaitParent} waits for a word from the parent, for steps only the parent can time.
 */
public final class ChildMain {
    private static final BufferedReader PARENT = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    private ChildMain() {
    }

    /**
     * Waits until the parent test sends {@code word} ({@link ChildJvm#send}): the parent has reached the state this child
     * must act in (a thread of its own asleep in a wait, say), which only the parent can see. No deadline of its own: the
     * parent's end of the pipe closes when it ends or kills this child, and that ends the wait with an exception.
     */
    public static void awaitParent(String word) throws IOException {
        for (String line; (line = PARENT.readLine()) != null; ) {
            if (line.equals(word)) {
                return;
            }
        }
        throw new IOException("the parent closed this child's input before it sent " + word);
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
