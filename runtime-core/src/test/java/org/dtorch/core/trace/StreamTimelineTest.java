package org.dtorch.core.trace;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The stream timeline's pool of event pairs and its placement of device spans on the host clock, with pairs whose
 * device times the test sets (a simulated stream), so it runs without a GPU.
 */
@Timeout(30)
class StreamTimelineTest {
    /** Device times of a simulated stream: the test says when each event ran, in the device's own nanoseconds. */
    private static final class FakePair implements StreamTimeline.EventPair {
        long deviceStart = -1;
        long deviceEnd = -1;
        boolean ended;
        boolean closed;
        /** A device that never passes this pair's end event. */
        boolean stuck;

        @Override
        public void recordStart() {
            ended = false;
        }

        @Override
        public void recordEnd() {
        }

        @Override
        public boolean ended() {
            return ended;
        }

        @Override
        public long durationNanos() {
            return deviceEnd - deviceStart;
        }

        @Override
        public long nanosAfter(StreamTimeline.EventPair previous) {
            return deviceStart - ((FakePair) previous).deviceEnd;
        }

        @Override
        public boolean awaitEnd(Duration timeout) {
            ended = !stuck;
            return ended;
        }

        @Override
        public void close() {
            closed = true;
        }
    }

    private final List<FakePair> made = new ArrayList<>();

    @TempDir
    Path dir;

    private StreamTimeline timeline() {
        return timeline(StreamTimeline.Subject.KERNELS);
    }

    private StreamTimeline timeline(StreamTimeline.Subject subject) {
        Tracer.nameThisThread(3, "device test:2");
        return new StreamTimeline(() -> {
            FakePair pair = new FakePair();
            made.add(pair);
            return pair;
        }, 2, "test:2 stream", subject);
    }

    @AfterEach
    void stopTracer() {
        if (Tracer.enabled()) {
            Tracer.stop();
        }
    }

    private static List<TraceEvent> deviceSpans(Trace trace) {
        List<TraceEvent> out = new ArrayList<>();
        for (Trace.Track track : trace.tracks()) {
            for (TraceEvent e : track.events()) {
                if (e.kind() == TraceEvent.Kind.DEVICE_KERNEL) {
                    assertEquals(StreamTimeline.TRACK_ID_BASE + 2, track.tid());
                    assertEquals(3, track.row().pid(), "the track is in the row of the thread that made the timeline");
                    assertEquals("test:2 stream (device time)", track.threadName());
                    out.add(e);
                }
            }
        }
        return out;
    }

    /** Runs a kernel: begin at host time {@code host}, ran on the device from {@code start} to {@code end}. */
    private static FakePair kernel(StreamTimeline timeline, long opId, long host, long start, long end, boolean complete) {
        StreamTimeline.Span span = timeline.begin(host);
        FakePair pair = (FakePair) pairOf(span);
        pair.deviceStart = start;
        pair.deviceEnd = end;
        pair.ended = complete;
        timeline.end(span, opId, "op" + opId);
        return pair;
    }

    private static StreamTimeline.EventPair pairOf(StreamTimeline.Span span) {
        try {
            var field = StreamTimeline.Span.class.getDeclaredField("events");
            field.setAccessible(true);
            return (StreamTimeline.EventPair) field.get(span);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void shouldReuseTwoPairsForKernelsThatCompleteOneAfterAnother() {
        try (StreamTimeline timeline = timeline()) {
            Tracer.start();
            long t0 = Tracer.now();
            for (int i = 0; i < 100; i++) {
                kernel(timeline, i, t0 + 1000L * i, 10L * i, 10L * i + 5, true);
            }
            assertEquals(2, timeline.pairsCreated(), "a completed pair goes back once its successor is placed");
            assertEquals(100, deviceSpans(Tracer.stop()).size());
        }
        assertEquals(2, made.size());
        assertTrue(made.stream().allMatch(p -> p.closed), "close() destroys every pair");
    }

    @Test
    void shouldPlaceSpansAtTheirHostStartOnAnIdleStreamAndChainThemOnABusyOne() {
        try (StreamTimeline timeline = timeline()) {
            Tracer.start();
            long t0 = Tracer.now();
            // Device clock: its own origin, far from the host's. Kernel 0 on an idle stream: placed at its host start.
            kernel(timeline, 0, t0, 5_000_000, 5_000_400, false);
            // Kernels 1 and 2 issued 100 ns apart while kernel 0 still runs: they queue behind it, with device gaps of 20 ns.
            kernel(timeline, 1, t0 + 100, 5_000_420, 5_001_420, false);
            kernel(timeline, 2, t0 + 200, 5_001_440, 5_001_540, false);
            // Kernel 0 in fact waited 1 us behind work issued before the recording, so the chain placed it 1 us early;
            // kernel 3, issued long after the stream went idle, runs at its host start, which corrects the chain.
            kernel(timeline, 3, t0 + 50_000, 5_049_000, 5_049_300, false);
            assertEquals(4, timeline.pairsCreated(), "pairs in flight are not reused");
            made.forEach(p -> p.ended = true);
            List<TraceEvent> spans = deviceSpans(Tracer.stop()); // stop() flushes what completed
            assertEquals(4, spans.size());
            long[][] expected = {
                {t0, t0 + 400},
                {t0 + 420, t0 + 1420},
                {t0 + 1440, t0 + 1540},
                {t0 + 50_000, t0 + 50_300}};
            for (int i = 0; i < 4; i++) {
                TraceEvent e = spans.get(i);
                assertEquals(i, e.id());
                assertEquals("op" + i, e.name());
                assertEquals(2, e.count(), "the device id");
                assertEquals(expected[i][0], e.start(), "start of op" + i);
                assertEquals(expected[i][1], e.end(), "end of op" + i);
            }
        }
    }

    @Test
    void shouldReportPairsInStreamOrderOnlyOnceTheyCompleted() {
        try (StreamTimeline timeline = timeline()) {
            Tracer.start();
            long t0 = Tracer.now();
            FakePair first = kernel(timeline, 0, t0, 0, 10, false);
            kernel(timeline, 1, t0 + 1, 10, 20, true); // complete, but behind the first
            timeline.flush();
            first.ended = true;
            timeline.flush();
            List<TraceEvent> spans = deviceSpans(Tracer.stop());
            assertEquals(List.of(0L, 1L), spans.stream().map(TraceEvent::id).toList(), "in stream order, each once");
        }
    }

    @Test
    void shouldLeaveKernelsUntimedBeyondTheLimitInFlightAndReportThePairsInFlightAtClose() {
        StreamTimeline timeline = timeline();
        Tracer.start();
        long t0 = Tracer.now();
        for (int i = 0; i <= StreamTimeline.MAX_IN_FLIGHT; i++) {
            StreamTimeline.Span span = timeline.begin(t0 + i);
            if (i < StreamTimeline.MAX_IN_FLIGHT) {
                FakePair pair = (FakePair) pairOf(span);
                pair.deviceStart = i;
                pair.deviceEnd = i + 1;
            } else {
                assertNull(span, "the pair beyond the limit");
            }
            timeline.end(span, i, "op");
        }
        assertEquals(1, timeline.untimed());
        assertEquals(StreamTimeline.MAX_IN_FLIGHT, timeline.pairsCreated());
        timeline.close(); // waits for each end event (awaitEnd) while recording, reports, destroys
        assertEquals(StreamTimeline.MAX_IN_FLIGHT, deviceSpans(Tracer.stop()).size());
        assertTrue(made.stream().allMatch(p -> p.closed));
        assertThrows(IllegalStateException.class, () -> timeline.begin(1));
        timeline.close(); // idempotent
    }

    @Test
    void shouldCloseWithoutWaitingForEverWhenAPairNeverCompletes() {
        StreamTimeline timeline = timeline();
        Tracer.start();
        long t0 = Tracer.now();
        kernel(timeline, 0, t0, 0, 10, false).stuck = true;
        kernel(timeline, 1, t0 + 1, 10, 20, false);
        timeline.close();
        assertEquals(0, deviceSpans(Tracer.stop()).size(), "nothing behind the stuck pair is reported");
        assertTrue(made.stream().allMatch(p -> p.closed), "every pair destroyed all the same");
    }

    @Test
    void shouldPutCollectivesOnATrackOfTheirOwnFoundThroughTheWorkersThread() throws Exception {
        try (StreamTimeline collectives = timeline(StreamTimeline.Subject.COLLECTIVES)) {
            StreamTimeline.bindCollectivesToThisThread(collectives);
            assertSame(collectives, StreamTimeline.collectivesOfThisThread());
            AtomicReference<StreamTimeline> seenElsewhere = new AtomicReference<>(collectives);
            Thread other = Thread.ofPlatform().start(() -> seenElsewhere.set(StreamTimeline.collectivesOfThisThread()));
            other.join();
            assertNull(seenElsewhere.get(), "another thread has no timeline of collectives");
            Tracer.start();
            kernel(StreamTimeline.collectivesOfThisThread(), 0, Tracer.now(), 0, 700, true);
            Trace trace = Tracer.stop();
            Trace.Track track = trace.tracks().stream().filter(t -> !t.events().isEmpty()).findFirst().orElseThrow();
            assertEquals(StreamTimeline.COLLECTIVE_TRACK_ID_BASE + 2, track.tid());
            assertEquals("test:2 stream, collectives (device time)", track.threadName());
            TraceEvent e = track.events().getFirst();
            assertEquals(TraceEvent.Kind.DEVICE_COLLECTIVE, e.kind());
            assertEquals(700, e.end() - e.start());

            Path file = dir.resolve("collective.json");
            trace.writeChromeJson(file);
            JsonNode span = null;
            for (JsonNode node : new ObjectMapper().readTree(file.toFile()).get("traceEvents")) {
                if (node.get("ph").asText().equals("X")) {
                    span = node;
                }
            }
            assertEquals("device", span.get("cat").asText());
            assertEquals("op0", span.get("name").asText());
            assertEquals(2, span.get("args").get("device").asLong());
            assertEquals(0.7, span.get("dur").asDouble(), 1e-9);
        } finally {
            StreamTimeline.bindCollectivesToThisThread(null);
        }
    }

    @Test
    void shouldDropSpansOfKernelsIssuedBeforeTheRecordingStarted() {
        try (StreamTimeline timeline = timeline()) {
            Tracer.start();
            long before = Tracer.now();
            Tracer.stop();
            Tracer.start();
            kernel(timeline, 0, before, 0, 10, true);
            kernel(timeline, 1, Tracer.now(), 20, 30, true);
            assertEquals(List.of(1L), deviceSpans(Tracer.stop()).stream().map(TraceEvent::id).toList());
        }
    }
}
