package org.dtorch.core.communication.store;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.UUID;
import org.dtorch.core.communication.CommPaths;

/**
 * Where a participant of a store runs, as {@link TensorStore#createForParticipants} compares it: its host and its
 * process (docs/communication-core.md, "Which backend").
 *
 * <p>A host is what the File store needs shared: one kernel (futexes) and one {@code /dev/shm}. Its identity is
 * {@code <hostname>#<12 hex digits>}, the digits a hash of the kernel's boot id and of the device and inode of
 * {@code /dev/shm}: two containers of one machine with their own {@code /dev/shm} are two hosts, and so are two
 * machines that share a host name. The system property {@value #HOST_ID_PROPERTY} replaces it (tests give two JVMs of
 * one machine two host identities to force the Network store between them; a launcher may name nodes).
 *
 * <p>A process is its pid and a random nonce drawn when this class loads, so that two JVMs with the same pid in
 * two pid namespaces are two processes.
 *
 * <p>Thread-safe: immutable values computed once.
 */
public final class HostIdentity {
    /** System property: this process's host identity, replacing the computed one; any non-blank text. */
    public static final String HOST_ID_PROPERTY = "dtorch.host.id";

    private static final String PROCESS = ProcessHandle.current().pid() + "@" + UUID.randomUUID().toString().substring(0, 8);
    private static volatile String computed;

    private HostIdentity() {
    }

    /**
     * This process's host identity: {@value #HOST_ID_PROPERTY} when set, else the computed one.
     *
     * @throws IllegalArgumentException if the property is set but blank
     */
    public static String local() {
        String property = System.getProperty(HOST_ID_PROPERTY);
        if (property != null) {
            if (property.isBlank() || property.indexOf('\t') >= 0 || property.indexOf('\n') >= 0) {
                throw new IllegalArgumentException("-D" + HOST_ID_PROPERTY + " must be a non-blank name without tabs or newlines, got '"
                    + property + "'");
            }
            return property;
        }
        return machine();
    }

    /**
     * The computed identity, whatever {@value #HOST_ID_PROPERTY} says: equal in two processes that share a kernel and a
     * {@code /dev/shm} (two "nodes" of a test on one machine share their shared memory).
     */
    public static String machine() {
        String id = computed;
        if (id == null) {
            id = compute();
            computed = id;
        }
        return id;
    }

    /** This process: {@code <pid>@<nonce>}. */
    public static String process() {
        return PROCESS;
    }

    private static String compute() {
        String hostname = read(Path.of("/proc/sys/kernel/hostname"));
        if (hostname.isEmpty()) {
            try {
                hostname = java.net.InetAddress.getLocalHost().getHostName();
            } catch (IOException e) {
                hostname = "localhost";
            }
        }
        String shm;
        try {
            Path dev = Path.of("/dev/shm");
            shm = Files.getAttribute(dev, "unix:dev") + ":" + Files.getAttribute(dev, "unix:ino");
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            shm = "";
        }
        String bootId = read(Path.of("/proc/sys/kernel/random/boot_id"));
        return hostname + "#" + CommPaths.sha256Hex(bootId + "|" + shm).substring(0, 12);
    }

    private static String read(Path path) {
        try {
            return Files.readString(path).strip();
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }
}
