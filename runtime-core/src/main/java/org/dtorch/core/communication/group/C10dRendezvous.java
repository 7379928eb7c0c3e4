package org.dtorch.core.communication.group;

import java.time.Duration;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.FileStore;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.Store;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.communication.store.RendezvousGroupStore;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;

/**
 * How the ranks of a c10d group meet and connect. They meet over a c10d {@code FileStore} under the instance's
 * directory, or, when the group is given a run-wide {@link RendezvousAddress} (ranks on several hosts), over a
 * {@code PrefixStore} of the group's name on a pooled {@code TCPStore} client of it ({@link RendezvousGroupStore}).
 * Each rank then makes its {@code ProcessGroupGloo} or {@code ProcessGroupNCCL} and gets it as a {@link C10dGroup},
 * which owns the group and the store from then on.
 *
 * <p>A failure to connect closes what was made and is a {@link CommException} that names the group and the
 * rendezvous; it is a timeout when the whole timeout passed, as {@link C10dErrorTranslator} decides.
 *
 * <p>Thread-safe: stateless; the ranks of a group connect concurrently, each on its own thread.
 */
final class C10dRendezvous {

    private C10dRendezvous() {
    }

    /**
     * Joins a Gloo group: blocks until all {@code size} ranks connected, or the timeout. {@code deviceId} is the
     * rank's CPU device id; it picks the Gloo transport device ({@link GlooDevices}). The ranks meet at
     * {@code rendezvous}, or in a FileStore when it is null.
     */
    static C10dGroup gloo(String initPath, RendezvousAddress rendezvous, String groupName, int rank, int size, Duration timeout,
                          long deviceId) {
        return connect("gloo", initPath, rendezvous, groupName, rank, size, timeout, (store, timeoutMillis) -> {
            try (ProcessGroupGloo.Options options = ProcessGroupGloo.Options.create(timeoutMillis)) {
                options.devices().push_back(GlooDevices.forCpuDevice(deviceId));
                options.threads(1);
                GlooLog.Muting quiet = GlooLog.muteWhileConnecting();
                try {
                    return new ProcessGroupGloo(store, rank, size, options);
                } finally {
                    quiet.close();
                }
            }
        });
    }

    /**
     * Joins an NCCL group of ranks on distinct CUDA devices; {@code device} is this rank's. NCCL connects
     * lazily, at the first collective (bounded by the timeout like every collective); the ranks meet at
     * {@code rendezvous}, or in a FileStore when it is null.
     */
    static C10dGroup nccl(String initPath, RendezvousAddress rendezvous, String groupName, int rank, int size, Duration timeout,
                          Device device) {
        Cuda.require(device);
        return connect("nccl", initPath, rendezvous, groupName, rank, size, timeout,
            (store, timeoutMillis) -> NcclGroups.create(store, rank, size, timeoutMillis));
    }

    /** Makes the process group of one backend over the store the ranks met through. */
    private interface Connector {
        Backend connect(Store store, Milliseconds timeoutMillis);
    }

    private static C10dGroup connect(String backendName, String initPath, RendezvousAddress rendezvous, String groupName, int rank,
                                     int size, Duration timeout, Connector connector) {
        long startNanos = System.nanoTime();
        C10dErrorTranslator errors = new C10dErrorTranslator(backendName, groupName, rank, size, rendezvous, timeout);
        Milliseconds timeoutMillis = new Milliseconds(timeout.toMillis());
        AutoCloseable store = null;
        try {
            Backend pg;
            if (rendezvous == null) {
                FileStore fileStore = new FileStore(CommPaths.file(initPath, ".filestore").toString(), size);
                store = fileStore;
                fileStore.setTimeout(timeoutMillis);
                pg = connector.connect(fileStore, timeoutMillis);
            } else {
                RendezvousGroupStore shared = RendezvousGroupStore.connect(rendezvous, initPath, timeout, "connect to " + errors.described());
                store = shared;
                pg = shared.handOver(prefixed -> connector.connect(prefixed, timeoutMillis));
                if (backendName.equals("gloo") && !glooConnectsLazily()) {
                    // Gloo uses its store only while connecting, NCCL at every new communicator: a Gloo group's client
                    // serves the next group, so a process opens few connections (each new one risks a DNS stall).
                    shared.close();
                }
            }
            return new C10dGroup(errors, rank, size, timeout, timeoutMillis, store, pg);
        } catch (RuntimeException e) {
            C10dGroup.closeQuietly(store);
            timeoutMillis.close();
            if (e instanceof CommException named) {
                throw named; // the rendezvous could not be reached; the message names it and the group
            }
            throw errors.translate(C10dErrorTranslator.CONNECT, e, startNanos);
        }
    }

    /** True when c10d's {@code TORCH_GLOO_LAZY_INIT} is set: Gloo then connects each pair through its store at first use. */
    private static boolean glooConnectsLazily() {
        String lazy = System.getenv("TORCH_GLOO_LAZY_INIT");
        return lazy != null && !lazy.isBlank() && !lazy.strip().equals("0");
    }
}
