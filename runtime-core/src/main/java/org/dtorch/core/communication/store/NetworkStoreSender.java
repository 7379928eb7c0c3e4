package org.dtorch.core.communication.store;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import org.bytedeco.pytorch.ByteVector;
import org.bytedeco.pytorch.Store;
import org.dtorch.core.communication.store.NetworkStoreLayout.TakeRequest;

/**
 * The thread of one rank of a {@link NetworkTensorStore} that serves its values: it pops the rank's take requests
 * from its queue at the rendezvous ({@link NetworkStoreLayout#requests}) and starts a Gloo send for each, from the
 * value's tensor, without a copy. Requests for values the rank no longer holds (a consumer that gave up late, a
 * reset) are dropped. It blocks on its own client of the rendezvous, and ends when it pops {@code stop}.
 *
 * <p>Thread-safe: {@link #start} once, then {@link #stop} once, from any thread.
 */
final class NetworkStoreSender {
    private static final System.Logger LOG = System.getLogger(NetworkStoreSender.class.getName());
    /** How long the sender's client may block on its queue before it asks again; it is woken by {@code stop}. */
    static final Duration QUEUE_WAIT = Duration.ofDays(1);

    private final NetworkStoreClients clients;
    private final Store client;
    private final String queue;
    private final String who;
    private final Map<String, NetworkStoreValue> values;
    private final NetworkStoreGloo gloo;
    private final Thread thread;
    private volatile boolean stopping;
    /** False once the client failed: it is not given back for reuse. */
    private volatile boolean healthy = true;

    /**
     * A sender of {@code values} (this rank's, by key) through {@code gloo}, popping {@code queue} on a client borrowed
     * from {@code clients}; {@code who} names the store in its log lines.
     */
    NetworkStoreSender(NetworkStoreClients clients, String queue, String who, Map<String, NetworkStoreValue> values, NetworkStoreGloo gloo,
                       int rank) {
        this.clients = clients;
        this.queue = queue;
        this.who = who;
        this.values = values;
        this.gloo = gloo;
        this.client = clients.borrowFor(who + " starting its sender", QUEUE_WAIT);
        this.thread = Thread.ofPlatform().daemon().name("dtorch-network-store-sender-" + rank).unstarted(this::serve);
    }

    void start() {
        thread.start();
    }

    /** True while the thread runs. */
    boolean isAlive() {
        return thread.isAlive();
    }

    /**
     * Pushes {@code stop} to the queue and waits for the thread, at most {@code timeout}; then gives its client back (if
     * the thread ended).
     */
    void stop(Duration timeout) {
        stopping = true;
        try {
            clients.call("stopping the sender of " + who, c -> {
                try (ByteVector stop = new ByteVector(NetworkStoreLayout.STOP.getBytes(StandardCharsets.UTF_8))) {
                    c.queuePush(queue, stop);
                }
                return null;
            });
            if (thread.getState() != Thread.State.NEW) {
                thread.join(timeout.toMillis());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            // the rendezvous failed: the thread's own pop fails too and it ends
        }
        if (!thread.isAlive()) {
            clients.giveBack(client, healthy && thread.getState() == Thread.State.TERMINATED);
        }
    }

    private void serve() {
        while (!stopping) {
            String line;
            long start = System.nanoTime();
            try (ByteVector item = client.queuePop(queue, true)) {
                line = new String(item.get(), StandardCharsets.UTF_8);
            } catch (RuntimeException e) {
                if (System.nanoTime() - start >= QUEUE_WAIT.toNanos() && !stopping) {
                    continue; // a day without requests
                }
                healthy = false;
                if (!stopping) {
                    LOG.log(System.Logger.Level.WARNING, "the sender of " + who + " stops: the rendezvous " + clients.address() + " failed: "
                        + NetworkStoreClients.c10dMessage(e) + "; consumers of this rank's values will time out");
                }
                return;
            }
            TakeRequest request;
            try {
                request = TakeRequest.parse(line);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "the sender of " + who + " dropped a request it cannot read: " + e.getMessage());
                continue;
            }
            if (request == null) {
                return; // stop
            }
            NetworkStoreValue value = values.get(request.key());
            if (value == null || value.epoch != request.epoch() || value.serial != request.serial()) {
                LOG.log(System.Logger.Level.DEBUG, () -> "the sender of " + who + " dropped a request for a value it no longer holds: " + line);
                continue;
            }
            try {
                value.serve(gloo, request);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "the sender of " + who + " could not send '" + request.key() + "' to rank "
                    + request.consumer() + ": " + NetworkStoreClients.c10dMessage(e));
            }
        }
    }
}
