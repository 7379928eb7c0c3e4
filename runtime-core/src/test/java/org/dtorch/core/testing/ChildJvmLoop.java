package org.dtorch.core.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.dtorch.core.runtime.process.JvmCommand;

/**
 * Runs a long loop test in a JVM of its own, so that what other tests left in the test JVM (resident memory,
 * collected or not) does not count, and checks it finished within its deadline with exit status 0.
 */
public final class ChildJvmLoop {

    private ChildJvmLoop() {
    }

    /** Runs {@code mainClass} with {@code args} and prints its output; fails unless it exits with 0 within {@code deadline}. */
    public static void runAndCheck(Class<?> mainClass, List<String> args, Duration deadline) throws Exception {
        JvmCommand.Outcome outcome = JvmCommand.of(mainClass.getName(), args, Map.of(), List.of()).runToCompletion(null, deadline);
        System.out.print(outcome.output());
        assertTrue(outcome.finished(), "the loop did not finish within " + deadline.toMinutes() + " minutes:\n" + outcome.output());
        assertEquals(0, outcome.exitStatus(), "the loop failed:\n" + outcome.output());
    }

    /** A child's {@code main}: runs {@code loop}, then exits with 0, or with 1 after printing what it threw. */
    public static void exitWith(ThrowingRunnable loop) {
        try {
            loop.run();
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    /** The loop of a child JVM. */
    @FunctionalInterface
    public interface ThrowingRunnable {
        void run() throws Exception;
    }
}
