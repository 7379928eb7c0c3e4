package org.dtorch.core.trace;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The tracer's recording, its per-thread buffers and its JSON, checked by parsing the output back. */
@Timeout(30)
class TracerTest {
    /** Quote, backslash, newline, a control character, a non-ASCII letter, an emoji (a surrogate pair), a lone surrogate. */
    private static final String ODD_KEY = "k\"\\\n\u0001\u00e9\ud83d\ude00\ud800!";

    @TempDir
    Path dir;

    @Test
    void shouldKeepTheEventsOfAThreadThatEndedAcrossChunksAndEscapeItsStrings() throws Exception {
        int events = 2500; // more than two chunks
        Tracer.start();
        Thread worker = Thread.ofPlatform().name("short-lived \"worker\"").start(() -> {
            Tracer.nameThisThread(7, "device test:6");
            for (int i = 0; i < events; i++) {
                Tracer.storeWait("destGet", ODD_KEY, Tracer.now());
            }
        });
        worker.join();
        assertFalse(worker.isAlive());
        Trace trace = Tracer.stop();
        assertEquals(events, trace.eventCount());

        Path file = dir.resolve("trace.json");
        trace.writeChromeJson(file);
        JsonNode root = new ObjectMapper().readTree(file.toFile());
        List<JsonNode> waits = new ArrayList<>();
        String processName = null;
        String threadName = null;
        for (JsonNode e : root.get("traceEvents")) {
            if (e.get("cat") != null && e.get("cat").asText().equals("store")) {
                waits.add(e);
            } else if (e.get("name").asText().equals("process_name") && e.get("pid").asInt() == 7) {
                processName = e.get("args").get("name").asText();
            } else if (e.get("name").asText().equals("thread_name") && e.get("pid").asInt() == 7) {
                threadName = e.get("args").get("name").asText();
            }
        }
        assertEquals(events, waits.size());
        assertEquals("device test:6", processName);
        assertEquals("short-lived \"worker\"", threadName);
        for (JsonNode w : waits) {
            assertEquals(ODD_KEY, w.get("args").get("key").asText());
            assertEquals(7, w.get("pid").asInt());
            assertEquals("X", w.get("ph").asText());
        }
        assertTrue(trace.table().contains("destGet"), trace.table());
    }

    @Test
    void shouldStopWhileThreadsRecordAndExportEveryEventPublishedBeforeIt() throws Exception {
        int threads = 4;
        java.util.concurrent.CountDownLatch recording = new java.util.concurrent.CountDownLatch(threads);
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        long[] recorded = new long[threads];
        List<Thread> recorders = new ArrayList<>();
        Tracer.start();
        for (int t = 0; t < threads; t++) {
            int index = t;
            recorders.add(Thread.ofPlatform().name("recorder-" + t).start(() -> {
                for (long i = 0; !done.get(); i++) {
                    Tracer.kernel(i, "op", index, Tracer.now());
                    recorded[index] = i;
                    if (i == 1500) {
                        recording.countDown();
                    }
                }
            }));
        }
        assertTrue(recording.await(20, java.util.concurrent.TimeUnit.SECONDS), "every recorder passed its first chunk");
        Trace trace = Tracer.stop();
        done.set(true);
        for (Thread t : recorders) {
            t.join();
        }
        // Each recorder's events are a prefix of what it recorded: ids 0, 1, 2, ... without a gap or a torn event.
        for (Trace.Track track : trace.tracks()) {
            List<TraceEvent> events = track.events();
            assertTrue(events.size() > 1500 && events.size() <= recorded[Math.toIntExact(events.getFirst().count())] + 1,
                track.threadName() + ": " + events.size());
            for (int i = 0; i < events.size(); i++) {
                assertEquals(i, events.get(i).id(), track.threadName());
                assertEquals("op", events.get(i).name());
                assertTrue(events.get(i).end() >= events.get(i).start());
            }
        }
        assertEquals(threads, trace.tracks().size());
    }

    @Test
    void shouldRecordNothingWhileOffNorAStartTimeTakenInAnEarlierSession() {
        assertEquals(0, Tracer.now());
        Tracer.storeWait("destGet", "off", Tracer.now());
        Tracer.promiseCompleted("off");
        Tracer.start();
        long early = Tracer.now();
        Tracer.stop();
        Tracer.start();
        Tracer.storeWait("destGet", "stale", early);
        assertEquals(0, Tracer.stop().eventCount());
    }

    @Test
    void shouldRefuseToStartTwiceOrStopWhatIsNotRecording() {
        assertThrows(IllegalStateException.class, Tracer::stop);
        Tracer.start();
        try {
            IllegalStateException twice = assertThrows(IllegalStateException.class, Tracer::start);
            assertTrue(twice.getMessage().contains("already being recorded"), twice.getMessage());
        } finally {
            Tracer.stop();
        }
        assertFalse(Tracer.enabled());
    }

    @Test
    void shouldWriteMicrosecondsExactlyFromNanoseconds() throws Exception {
        StringWriter out = new StringWriter();
        JsonWriter json = new JsonWriter(out);
        json.beginArray().micros(0).micros(999).micros(1000).micros(1_234_567_891L).micros(-1500).endArray();
        assertEquals("[0.000,0.999,1.000,1234567.891,-1.500]", out.toString());
    }
}
