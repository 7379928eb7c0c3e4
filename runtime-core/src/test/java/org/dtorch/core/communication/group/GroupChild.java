package org.dtorch.core.communication.group;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.ChildMain;

/**
 * One rank of a group in a child JVM, for {@link ThreadGroupProcessTest}:
 * {@code GroupChild <worldSize> <rank> <instance> <sameDevice> [<instance> <sameDevice> ...]}. Runs every collective
 * in the group of each instance and backend in turn, one after the other in this JVM, and prints the mismatches (none:
 * {@code OK}).
 */
public final class GroupChild {

    private GroupChild() {
    }

    public static void main(String[] args) {
        int world = Integer.parseInt(args[0]);
        int rank = Integer.parseInt(args[1]);
        ChildMain.exitWithMismatches(() -> {
            List<String> failures = new ArrayList<>();
            for (int i = 2; i + 1 < args.length; i += 2) {
                try (ThreadGroupManager manager = new ThreadGroupManager(Boolean.parseBoolean(args[i + 1]), args[i], Duration.ofSeconds(60),
                    ThreadGroupManager.Role.WORKER)) {
                    ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank);
                    System.out.println("BACKEND " + group.backendName());
                    failures.addAll(ThreadGroupProcessTest.runAll(group).stream().map(f -> group.backendName() + ": " + f).toList());
                }
            }
            return failures;
        });
    }
}
