package org.dtorch.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.dtorch.core.communication.CommPaths;
import org.dtorch.core.testing.Await;
import org.dtorch.core.testing.RankThreads;
import org.dtorch.core.testing.ShmFiles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class SharedMemoryTest {
    private final String instance = ShmFiles.freshInstance("shm");

    private String name(String suffix) {
        return SharedRegion.PREFIX + instance + "-" + suffix;
    }

    @Test
    void shouldShareBytesBetweenMappingsOfOneNameOwnerOnly() throws Exception {
        String name = name("region");
        try (SharedRegion a = SharedRegion.create(name, 8192).orElseThrow()) {
            assertTrue(SharedRegion.create(name, 8192).isEmpty(), "a second create of the same name must fail");
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(SharedRegion.pathOf(name))));
            try (SharedRegion b = SharedRegion.open(name).orElseThrow()) {
                a.segment().set(ValueLayout.JAVA_LONG, 4096, 0x1234_5678_9abcL);
                assertEquals(0x1234_5678_9abcL, b.segment().get(ValueLayout.JAVA_LONG, 4096));
                assertEquals(8192, b.size());
            }
            a.unlink();
            assertTrue(SharedRegion.open(name).isEmpty());
            a.segment().set(ValueLayout.JAVA_INT, 0, 7); // still mapped after unlink
            assertTrue(a.retain());
            a.release();
        }
        assertEquals(List.of(), ShmFiles.of(instance));
    }

    @Test
    void shouldWakeAFutexWaiterAndTimeOutWithoutOne() throws Exception {
        String name = name("futex");
        try (SharedRegion region = SharedRegion.create(name, 4096).orElseThrow()) {
            MemorySegment s = region.segment();
            assertEquals(Futex.Wake.TIMED_OUT, Futex.await(s, 0, 0, 20_000_000L));
            assertEquals(Futex.Wake.CHANGED, Futex.await(s, 0, 1, 20_000_000L), "a word that differs must not sleep");
            AtomicReference<Futex.Wake> woke = new AtomicReference<>();
            Thread waiter = Thread.ofPlatform().start(() -> woke.set(Futex.await(s, 0, 0, 10_000_000_000L)));
            Await.asleep(waiter, Duration.ofSeconds(10)); // on the futex, so that the wake below has a sleeper to wake
            Shm.putIntRelease(s, 0, 1);
            Futex.wakeAll(s, 0);
            waiter.join(5000);
            assertFalse(waiter.isAlive());
            assertEquals(Futex.Wake.CHANGED, woke.get());
        } finally {
            SharedRegion.unlink(name);
        }
    }

    @Test
    void shouldExcludeHoldersOfTheMonitorLock() {
        String name = name("monitor");
        try (SharedRegion region = SharedRegion.create(name, 4096).orElseThrow()) {
            MemorySegment s = region.segment();
            ShmMonitor monitor = new ShmMonitor(s, 0);
            int threads = 4;
            int rounds = 20_000;
            RankThreads.runAll(threads, rank -> {
                for (int i = 0; i < rounds; i++) {
                    monitor.lock();
                    try {
                        // a plain read-modify-write: only the lock makes it exact
                        s.set(ValueLayout.JAVA_LONG, 64, s.get(ValueLayout.JAVA_LONG, 64) + 1);
                        monitor.signalAll();
                    } finally {
                        monitor.unlock();
                    }
                }
            });
            assertEquals((long) threads * rounds, s.get(ValueLayout.JAVA_LONG, 64));
            assertEquals(threads * rounds, monitor.sequence());
        } finally {
            SharedRegion.unlink(name);
        }
    }

    @Test
    void shouldRemoveOnlyWhatDeadInstancesLeft() throws Exception {
        Process shortLived = new ProcessBuilder("true").start();
        shortLived.waitFor();
        long deadPid = shortLived.pid();
        String staleFile = SharedRegion.PREFIX + "p" + deadPid + "-zz999-1-st-0123";
        String liveFile = SharedRegion.PREFIX + instance + "-st-live";
        Path staleDir = CommPaths.root().resolve("p" + deadPid + "-zz999-1");
        SharedRegion.create(staleFile, 4096).orElseThrow().close();
        SharedRegion.create(liveFile, 4096).orElseThrow().close();
        Files.writeString(CommPaths.file(staleDir.getFileName() + "/cpu-0_1", ".filestore"), "x");
        try {
            // Another test JVM's runtime may sweep first (a runtime sweeps when it starts): either way the stale entries
            // are gone once this sweep returns, and the live one stays, named by no sweep.
            List<String> removed = ShmJanitor.removeStale();
            assertFalse(SharedRegion.exists(staleFile), "this sweep removed " + removed);
            assertFalse(Files.exists(staleDir), "this sweep removed " + removed);
            assertFalse(removed.contains(liveFile), removed.toString());
            assertTrue(SharedRegion.exists(liveFile), "files of a live process must stay");
        } finally {
            SharedRegion.unlink(liveFile);
            SharedRegion.unlink(staleFile);
        }
    }
}
