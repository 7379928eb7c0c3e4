package org.dtorch.ops.difftest;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.core.communication.CommTimeoutException;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.graph.ShardingException;
import org.dtorch.core.tensor.TorchTensors;

/**
 * One run of a {@link Program} against a runtime, op by op: {@link #reference()} first runs the whole program in
 * libtorch on one device of the runtime's kind (a program libtorch refuses is {@link Verdict#INVALID}: there is nothing
 * to compare with), then
 * {@link #issue()} issues one step at a time on the runtime, and {@link #finish()} fetches the compared values and
 * compares each with libtorch's ({@link Tolerance}). {@link #run} does all three. A refusal on the runtime of a step
 * libtorch runs is a failure; so is an error, a mismatch and a wait that outlives the runtime's deadline.
 *
 * <p>The reference runs where a user of the runtime would run the program on one device: on the CPU for a CPU runtime,
 * on the first GPU ({@code cuda:0}) for a CUDA one. libtorch's CPU and CUDA kernels of the same operator round
 * differently (a CUDA layer norm's mean and variance, its {@code exp}), so a CPU reference would hold a CUDA runtime to
 * the CPU's last bits; on the same kind of device a replicated operator runs the very kernel of the reference.
 *
 * <p>Not thread-safe: one thread drives a run.
 */
public final class ProgramRun implements AutoCloseable {
    /** What a run found. */
    public enum Verdict {
        /** Every compared value matches. */
        PASS,
        /** libtorch on one device refuses the program: nothing to compare. */
        INVALID,
        /** A value differs (shape, dtype or values). */
        MISMATCH,
        /** The runtime refused a step libtorch runs (an exception when the step was issued). */
        REFUSED,
        /**
         * The runtime refused an in-place write with a {@code ShardingException}, as documented for writes whose target's
         * placements the write cannot keep (a partial target of two reductions, a partial cast that does not commute):
         * a write never moves its target. Counted, not a failure.
         */
        EXPECTED_REFUSAL,
        /** A step failed on the devices, or fetching a value failed. */
        ERROR,
        /** A wait outlived the runtime's deadline. */
        TIMEOUT;

        public boolean failed() {
            return this != PASS && this != INVALID && this != EXPECTED_REFUSAL;
        }
    }

    /** A verdict and what it is about (the step or value and the message; empty for a pass). */
    public record Outcome(Verdict verdict, String detail) {
        public boolean failed() {
            return verdict.failed();
        }

        @Override
        public String toString() {
            return verdict + (detail.isEmpty() ? "" : ": " + detail);
        }
    }

    private final DTorch dt;
    private final Program program;
    private final List<DeviceMesh> meshes;
    /** Where the reference runs: the runtime's device kind, index 0. */
    private final Device device;
    private final List<Tensor> expected = new ArrayList<>();
    /** Per value, the loosest floating dtype among the values it was computed from ({@link Tolerance#looser}). */
    private final List<ScalarType> precision = new ArrayList<>();
    private final List<DTensor> values = new ArrayList<>();
    private int next;

    public ProgramRun(DTorch dt, Program program) {
        this.dt = dt;
        this.program = program;
        this.meshes = program.meshes().stream().map(m -> m.on(dt)).toList();
        this.device = dt.deviceKind() == DeviceKind.CUDA ? Device.cuda(0) : Device.cpu(0);
    }

    /** Runs {@code program} on {@code dt} and on libtorch and compares. */
    public static Outcome run(DTorch dt, Program program) {
        try (ProgramRun run = new ProgramRun(dt, program)) {
            Outcome ref = run.reference();
            if (ref != null) {
                return ref;
            }
            while (run.hasNext()) {
                Outcome o = run.issue();
                if (o != null) {
                    return o;
                }
            }
            return run.finish();
        }
    }

    /** Runs the whole program in libtorch; null when it runs, else {@link Verdict#INVALID}. */
    public Outcome reference() {
        int i = 0;
        try {
            for (; i < program.steps().size(); i++) {
                Step s = program.steps().get(i);
                List<Tensor> out = s.reference(Arrays.stream(s.reads()).mapToObj(expected::get).toList());
                if (s instanceof Source && device.kind() != DeviceKind.CPU) {
                    try (Tensor host = out.getFirst()) {
                        out = List.of(TorchTensors.to(host, device));
                    }
                }
                ScalarType inherited = ScalarType.Bool;
                for (int r : s.reads()) {
                    inherited = Tolerance.looser(inherited, precision.get(r));
                }
                if (s.writes()) {
                    precision.set(s.reads()[0], inherited);
                }
                for (Tensor t : out) {
                    expected.add(t);
                    precision.add(Tolerance.looser(TorchTensors.dtype(t), inherited));
                }
            }
            return null;
        } catch (RuntimeException e) {
            return new Outcome(Verdict.INVALID, "step " + i + " (" + program.steps().get(i) + "): " + firstLine(e));
        }
    }

    public boolean hasNext() {
        return next < program.steps().size();
    }

    /** Issues the next step on the runtime; null when it was taken, else the failure. */
    public Outcome issue() {
        int i = next++;
        Step s = program.steps().get(i);
        try {
            values.addAll(s.run(dt, meshes, Arrays.stream(s.reads()).mapToObj(values::get).toList()));
            return null;
        } catch (RuntimeException e) {
            Verdict refused = s.writes() && e instanceof ShardingException ? Verdict.EXPECTED_REFUSAL : Verdict.REFUSED;
            return new Outcome(kind(e, refused), "step " + i + " (" + s + "): " + e.getClass().getSimpleName() + ": " + firstLine(e));
        }
    }

    /** Fetches every compared value and compares it with libtorch's; the first failure, or a pass. */
    public Outcome finish() {
        for (int v : program.compared()) {
            try (Tensor fetched = values.get(v).toTorch(); Tensor got = TorchTensors.to(fetched, Device.cpu(0));
                 Tensor want = TorchTensors.to(expected.get(v), Device.cpu(0))) {
                String problem = Tolerance.compare(want, got, precision.get(v));
                if (problem != null) {
                    return new Outcome(Verdict.MISMATCH, "v" + v + " (" + values.get(v).placements() + " on " + values.get(v).mesh() + "): " + problem);
                }
            } catch (RuntimeException e) {
                return new Outcome(kind(e, Verdict.ERROR), "fetching v" + v + ": " + e.getClass().getSimpleName() + ": " + firstLine(e));
            }
        }
        return new Outcome(Verdict.PASS, "");
    }

    private static Verdict kind(RuntimeException e, Verdict otherwise) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof CommTimeoutException) {
                return Verdict.TIMEOUT;
            }
        }
        FailureKind k = FailureKind.of(e);
        return k == FailureKind.TIMEOUT ? Verdict.TIMEOUT : k == FailureKind.UNKNOWN ? otherwise : Verdict.ERROR;
    }

    private static String firstLine(Throwable e) {
        String m = String.valueOf(e.getMessage());
        int nl = m.indexOf('\n');
        return nl < 0 ? m : m.substring(0, nl);
    }

    /** Releases every value on the runtime and in libtorch. */
    @Override
    public void close() {
        values.forEach(DTensor::close);
        values.clear();
        expected.forEach(Tensor::close);
        expected.clear();
    }
}
