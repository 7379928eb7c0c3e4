package org.dtorch.core.communication.promise;

import java.lang.foreign.MemorySegment;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.shm.Futex;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.Shm;

/**
 * Completes the {@link java.util.concurrent.CompletableFuture} views of this process's File futures with
 * one thread, however many futures are pending: every process that creates File promises has a doorbell
 * (a small shared-memory region), each promise names its creator's doorbell, and whoever completes a
 * promise rings it. The watcher sleeps on the doorbell's futex and, when rung, polls its pending futures.
 * It also wakes every {@value #SLICE_MILLIS} ms, so a completion whose ring was lost (its process died
 * in between) is still seen. The same thread ends the loans of CUDA values this process lent to futures of
 * other processes ({@link FilePromiseRegion}): their readers ring this doorbell when they release a value.
 *
 * <pre>
 * doorbell region (4096 bytes)
 *   offset  size  field
 *   0       4     rings      incremented by every ring; the futex word
 *   4       4     sleepers   1 while the watcher sleeps
 * </pre>
 *
 * <p>Thread-safe: {@link #watch} from any thread; {@link #ring} from any thread of any process.
 */
final class FileFutureWatcher {
    private static final long RINGS = 0;
    private static final long SLEEPERS = 4;
    private static final long SLICE_MILLIS = 200;
    private static final int OPEN_BELLS_LIMIT = 16;
    /** Doorbells of other processes, opened for ringing; least recently used first. Guarded by itself. */
    private static final LinkedHashMap<String, SharedRegion> OPEN_BELLS = new LinkedHashMap<>(16, 0.75f, true);

    private final SharedRegion bell;
    private final MemorySegment segment;
    private final Set<BooleanSupplier> pending = ConcurrentHashMap.newKeySet();
    private final Object idle = new Object();
    private Thread thread;

    private static final class Holder {
        static final FileFutureWatcher INSTANCE = new FileFutureWatcher();
    }

    private FileFutureWatcher() {
        String name = SharedRegion.PREFIX + GlobalCommInstanceId.processPrefix() + "-bell-" + ProcessHandle.current().pid();
        SharedRegion.unlink(name); // a doorbell of this very process id can only be stale
        this.bell = SharedRegion.create(name, 4096).orElseThrow(() -> new IllegalStateException("cannot create doorbell " + name));
        this.segment = bell.segment();
        Runtime.getRuntime().addShutdownHook(new Thread(bell::unlink, "dtorch-doorbell-cleanup"));
    }

    /** This process's watcher, creating its doorbell on first use. */
    static FileFutureWatcher instance() {
        return Holder.INSTANCE;
    }

    /** The name promises created here record, so that completers can ring it. */
    String doorbellName() {
        return bell.name();
    }

    /**
     * Calls {@code poll} after every ring until it returns true (it completes its future when its promise
     * is done). Polls at once, so a promise completed already needs no ring.
     */
    void watch(BooleanSupplier poll) {
        if (poll.getAsBoolean()) {
            return;
        }
        pending.add(poll);
        // A ring between the first poll and the registration was for us and was missed: look again.
        if (poll.getAsBoolean()) {
            pending.remove(poll);
            return;
        }
        synchronized (idle) {
            if (thread == null) {
                thread = Thread.ofPlatform().daemon().name("dtorch-file-futures").start(this::loop);
            }
            idle.notifyAll();
        }
    }

    private void loop() {
        while (true) {
            int seen = Shm.getIntVolatile(segment, RINGS);
            for (Iterator<BooleanSupplier> it = pending.iterator(); it.hasNext(); ) {
                BooleanSupplier poll = it.next();
                boolean done;
                try {
                    done = poll.getAsBoolean();
                } catch (RuntimeException e) {
                    done = true; // the poll completed its future exceptionally, or cannot: stop watching it
                }
                if (done) {
                    it.remove();
                }
            }
            if (pending.isEmpty()) {
                synchronized (idle) {
                    while (pending.isEmpty()) {
                        try {
                            idle.wait();
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
                continue;
            }
            Shm.putIntVolatile(segment, SLEEPERS, 1);
            if (Shm.getIntVolatile(segment, RINGS) == seen) {
                Futex.await(segment, RINGS, seen, SLICE_MILLIS * 1_000_000L);
            }
            Shm.putIntVolatile(segment, SLEEPERS, 0);
        }
    }

    /** Rings the doorbell {@code name} (of any process); a missing doorbell is ignored. */
    static void ring(String name) {
        if (name == null || name.isEmpty()) {
            return;
        }
        SharedRegion region;
        synchronized (OPEN_BELLS) {
            region = OPEN_BELLS.get(name);
            if (region == null) {
                region = SharedRegion.open(name).orElse(null);
                if (region == null) {
                    return; // its process is gone, and nobody waits there any more
                }
                OPEN_BELLS.put(name, region);
                if (OPEN_BELLS.size() > OPEN_BELLS_LIMIT) {
                    Iterator<Map.Entry<String, SharedRegion>> eldest = OPEN_BELLS.entrySet().iterator();
                    SharedRegion evicted = eldest.next().getValue();
                    eldest.remove();
                    evicted.close();
                }
            }
            MemorySegment s = region.segment();
            Shm.getAndAddInt(s, RINGS, 1);
            if (Shm.getIntVolatile(s, SLEEPERS) != 0) {
                Futex.wakeAll(s, RINGS);
            }
        }
    }
}
