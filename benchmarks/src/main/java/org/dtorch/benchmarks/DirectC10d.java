package org.dtorch.benchmarks;

import java.time.Duration;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.PrefixStore;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.dtorch.core.communication.group.GlooLog;
import org.dtorch.core.communication.store.RendezvousAddress;

/**
 * c10d called directly, as the baselines and the rendezvous harness use it: a new {@code TCPStore} client of a
 * rendezvous, and a Gloo group over a {@code PrefixStore} of one.
 *
 * <p>Thread-safe: stateless.
 */
final class DirectC10d {

    private DirectC10d() {
    }

    /** A new client of the {@code TCPStore} at {@code address}; connecting retries until {@code timeout} (c10d's own retries). */
    static TCPStore client(RendezvousAddress address, Duration timeout) {
        try (TCPStoreOptions options = new TCPStoreOptions(); Milliseconds millis = new Milliseconds(timeout.toMillis())) {
            options.port((short) address.port());
            options.isServer(false);
            options.waitWorkers(false);
            options.timeout(millis);
            return new TCPStore(address.host(), options);
        }
    }

    /**
     * Rank {@code rank} of a Gloo group of {@code world} over {@code client}'s keys under {@code prefix}, on a device of
     * its own listening on 127.0.0.1. The group adopts {@code client} (the presets' {@code intrusive_ptr} adapter hands a
     * Java-made store to c10d outright): closing the group frees both.
     */
    static ProcessGroupGloo glooGroup(TCPStore client, String prefix, int rank, int world, Duration timeout) {
        try (Milliseconds millis = new Milliseconds(timeout.toMillis());
             ProcessGroupGloo.Options glooOptions = ProcessGroupGloo.Options.create(millis)) {
            PrefixStore prefixed = new PrefixStore(prefix, client);
            client.deallocate(false); // adopted by the PrefixStore
            glooOptions.devices().push_back(ProcessGroupGloo.createDeviceForHostname("127.0.0.1"));
            glooOptions.threads(1);
            GlooLog.Muting quiet = GlooLog.muteWhileConnecting();
            try {
                return new ProcessGroupGloo(prefixed, rank, world, glooOptions);
            } finally {
                prefixed.deallocate(false); // adopted by the group
                quiet.close();
            }
        }
    }
}
