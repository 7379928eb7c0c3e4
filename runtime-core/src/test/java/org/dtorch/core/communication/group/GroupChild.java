package org.dtorch.core.communication.group;

import java.time.Duration;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.ChildMain;

/**
 * One rank of a group in a child JVM, for {@link ThreadGroupProcessTest}:
 * {@code GroupChild <instance> <sameDevice> <worldSize> <rank>}. Runs every collective and prints the
 * mismatches (none: {@code OK}).
 */
public final class GroupChild {

    private GroupChild() {
    }

    public static void main(String[] args) {
        int world = Integer.parseInt(args[2]);
        int rank = Integer.parseInt(args[3]);
        ChildMain.exitWithMismatches(() -> {
            try (ThreadGroupManager manager = new ThreadGroupManager(Boolean.parseBoolean(args[1]), args[0], Duration.ofSeconds(60),
                ThreadGroupManager.Role.WORKER)) {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, GroupFixtures.ids(world), rank);
                System.out.println("BACKEND " + group.backendName());
                return ThreadGroupProcessTest.runAll(group);
            }
        });
    }
}
