package org.dtorch.core.communication.store;

import java.util.ArrayList;
import java.util.List;
import org.dtorch.core.communication.CommInterruptedException;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.Deadline;

/**
 * Where the participants of a store are, for {@link TensorStore#createForParticipants} when they meet at a
 * {@link RendezvousAddress}: each rank writes its host identity and process ({@link HostIdentity}) under the store
 * key at the rendezvous, waits for the others' and compares. All ranks read the same places, so they pick the same
 * backend: MEMORY when every rank is in this process, FILE when every rank is on this host, NETWORK otherwise.
 *
 * <p>The keys, beside the store's own ({@link NetworkStoreLayout}):
 * <pre>
 * dtorch/where/&lt;S&gt;/r&lt;r&gt;/n           counter    rank r's checks of S; its value - 1 is the check I all ranks share
 * dtorch/where/&lt;S&gt;/i&lt;I&gt;/p/&lt;r&gt;       "hostId\tprocess"   rank r's place
 * dtorch/where/&lt;S&gt;/i&lt;I&gt;/read         counter    ranks that read every place; the last deletes them
 * </pre>
 *
 * <p>Thread-safe: stateless; every participant calls {@link #backendFor} at about the same time.
 */
final class ParticipantPlaces {
    private ParticipantPlaces() {
    }

    /** Meets the other participants at {@code info.rendezvous()} and returns the backend their places need. */
    static TensorStoreType backendFor(TensorStoreCreateInfo info) {
        String who = "finding the participants of store '" + info.storeKey() + "' (rank " + info.rank() + " on host '" + info.hostId() + "')";
        Deadline deadline = Deadline.after(info.timeout());
        String root = "dtorch/where/" + NetworkStoreLayout.counted(info.storeKey()) + "/";
        String counter = root + "r" + info.rank() + "/n";
        int world = info.worldSize();
        try (NetworkStoreClients clients = NetworkStoreClients.connect(info.rendezvous(), info.timeout(), who)) {
            long check = clients.call(who, c -> c.add(counter, 1)) - 1;
            String at = root + "i" + check + "/";
            List<String> places = new ArrayList<>(world);
            for (int r = 0; r < world; r++) {
                places.add(at + "p/" + r);
            }
            String mine = info.hostId() + "\t" + HostIdentity.process();
            List<String> read;
            try {
                clients.call(who, c -> {
                    c.set(places.get(info.rank()), mine);
                    return null;
                });
                NetworkStoreClients.Outcome outcome = clients.await(who, places, deadline);
                if (outcome != NetworkStoreClients.Outcome.ARRIVED) {
                    String seen = "ranks arrived: " + arrived(clients, who, places) + " of " + world + " (rendezvous " + info.rendezvous() + ")";
                    throw outcome == NetworkStoreClients.Outcome.INTERRUPTED
                        ? new CommInterruptedException(who + " was interrupted: " + seen, new InterruptedException())
                        : new CommTimeoutException(who + " " + deadline.timedOutAfter() + ": " + seen);
                }
                read = clients.call(who, c -> {
                    List<String> values = new ArrayList<>(world);
                    for (String p : places) {
                        values.add(c.get_to_str(p));
                    }
                    return values;
                });
            } catch (RuntimeException e) {
                try {
                    clients.call(who, c -> {
                        c.add(counter, -1);
                        return c.deleteKey(places.get(info.rank()));
                    });
                } catch (RuntimeException ignored) {
                    // the rendezvous failed: nothing to withdraw there
                }
                throw e;
            }
            clients.call(who, c -> {
                if (c.add(at + "read", 1) == world) {
                    for (String p : places) {
                        c.deleteKey(p);
                    }
                    c.deleteKey(at + "read");
                }
                return null;
            });
            return backend(read, mine);
        }
    }

    /** MEMORY if every place is {@code mine}, FILE if every place is on my host, else NETWORK. */
    static TensorStoreType backend(List<String> places, String mine) {
        String myHost = mine.substring(0, mine.indexOf('\t'));
        boolean sameProcess = true;
        boolean sameHost = true;
        for (String place : places) {
            sameProcess &= place.equals(mine);
            sameHost &= place.substring(0, place.indexOf('\t')).equals(myHost);
        }
        return sameProcess ? TensorStoreType.MEMORY : sameHost ? TensorStoreType.FILE : TensorStoreType.NETWORK;
    }

    private static List<Integer> arrived(NetworkStoreClients clients, String who, List<String> places) {
        List<Integer> arrived = new ArrayList<>();
        for (int r = 0; r < places.size(); r++) {
            String key = places.get(r);
            boolean there = clients.call(who, c -> {
                try (org.bytedeco.pytorch.StringVector one = new org.bytedeco.pytorch.StringVector(key)) {
                    return c.check(one);
                }
            });
            if (there) {
                arrived.add(r);
            }
        }
        return arrived;
    }
}
