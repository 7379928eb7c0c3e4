package org.dtorch.core.runtime;

import java.time.Duration;
import org.dtorch.core.device.DeviceEvent;
import org.dtorch.core.device.DeviceStream;
import org.dtorch.core.trace.StreamTimeline;

/**
 * A {@link StreamTimeline}'s pair on CUDA: two {@linkplain DeviceEvent#createTimed timed events} of the worker's stream,
 * created on first use (c10 creates the native event at its first record) and destroyed at {@link #close()}.
 *
 * <p>Not thread-safe: used under its timeline's lock.
 */
final class TimedEventPair implements StreamTimeline.EventPair {
    private final DeviceStream stream;
    private final DeviceEvent start;
    private final DeviceEvent end;

    TimedEventPair(DeviceStream stream) {
        this.stream = stream;
        this.start = DeviceEvent.createTimed(stream.device());
        this.end = DeviceEvent.createTimed(stream.device());
    }

    @Override
    public void recordStart() {
        start.record(stream);
    }

    @Override
    public void recordEnd() {
        end.record(stream);
    }

    @Override
    public boolean ended() {
        return end.query();
    }

    @Override
    public long durationNanos() {
        return start.elapsedNanos(end);
    }

    @Override
    public long nanosAfter(StreamTimeline.EventPair previous) {
        return ((TimedEventPair) previous).end.elapsedNanos(start);
    }

    @Override
    public boolean awaitEnd(Duration timeout) {
        try {
            end.synchronize(timeout);
            return true;
        } catch (RuntimeException e) { // timed out, or interrupted by the runtime's cancel
            return false;
        }
    }

    @Override
    public void close() {
        start.close();
        end.close();
    }
}
