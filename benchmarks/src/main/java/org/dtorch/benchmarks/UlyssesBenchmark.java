package org.dtorch.benchmarks;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.communication.group.ThreadGroupManager;
import org.dtorch.core.communication.group.UlyssesComm;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.BalancedSplit;

/**
 * Ulysses' sequence-to-heads all-to-all two ways on the same 4 CPU devices and {@code [B, S, H, D]} float32 tensor:
 * through the single-controller runtime, {@code DTensor.redistribute(S(2))} of a tensor sharded {@code S(1)} (the
 * planner's one all-to-all step, issued by the client and run by the device threads, timed to {@code sync()}), against
 * the per-rank helper {@code UlyssesComm.ulyssesScatterHeads} on rank threads (from handing it to the threads to the
 * last one done, so that both are timed on one thread from issue to completion). Both run the same
 * {@code ThreadGroup.allToAll(x, 1, 2, S)}, so the ratio is what the runtime adds around it. Gloo and the same-device
 * backend; variants alternate in rounds, and so does which goes first; each variant's results are checked against the
 * whole tensor once, and its inputs again at the end.
 */
final class UlyssesBenchmark {
    private static final int WORLD = 4;
    private static final int PER_ROUND = 5;
    private static final List<long[]> SHAPES = List.of(new long[] {1, 64, 8, 16}, new long[] {1, 1024, 16, 64});
    private static final long SEED = 13;

    private UlyssesBenchmark() {
    }

    static void run(Report report, BenchOptions options) throws Exception {
        report.section("Ulysses all-to-all: the runtime's S(1) -> S(2) against `UlyssesComm`, 4 CPU devices", "ulysses",
            "Measured: `DTensor.redistribute(S(2))` of a `[B, S, H, D]` float32 tensor sharded `S(1)` on a 1-D mesh of the 4 devices of a "
                + "`DTorch` runtime, the result closed, then `sync()`, timed on the client. Baseline: "
                + "`UlyssesComm.ulyssesScatterHeads` of each rank's sequence shard on 4 rank threads of a `ThreadGroupManager` of the "
                + "same backend, timed on the harness thread from handing the call to the rank threads to the last one done (the runtime "
                + "is timed the same way, from issue to completion). Both are one `ThreadGroup.allToAll`; the ratio (baseline / measured) "
                + "is the share of the runtime's time that is the all-to-all itself. Per run " + options.rounds() * PER_ROUND
                + " samples per variant, alternating in rounds (which goes first alternates too), after a warm-up round.");
        List<Comparison> rows = new ArrayList<>();
        for (boolean sameDevice : new boolean[] {false, true}) {
            for (long[] shape : SHAPES) {
                if (options.bytes(bytes(shape)) == bytes(shape)) {
                    rows.add(compare(options, sameDevice, shape));
                }
            }
        }
        report.comparisons(rows);
    }

    private static long bytes(long[] shape) {
        long n = Float.BYTES;
        for (long s : shape) {
            n *= s;
        }
        return n;
    }

    private static Comparison compare(BenchOptions options, boolean sameDevice, long[] shape) throws Exception {
        String label = (sameDevice ? "same-device" : "Gloo") + ", " + java.util.Arrays.toString(shape) + " (" + Unit.size(bytes(shape)) + ")";
        Comparison row = new Comparison(label, Goal.context("the all-to-all's share of the runtime's time"));
        List<Long> ids = List.of(0L, 1L, 2L, 3L);
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(WORLD).sameDevice(sameDevice).timeout(Duration.ofSeconds(300)).build());
             RankPool pool = new RankPool(WORLD);
             ThreadGroupManager groups = new ThreadGroupManager(sameDevice, GlobalCommInstanceId.next(), Duration.ofSeconds(300))) {
            DeviceMesh mesh = dt.defaultMesh();
            try (DTensor x = dt.randn(SEED, shape, mesh, Placement.shard(1)); Tensor whole = x.toTorch()) {
                List<UlyssesComm> comms = pool.onRanks(rank -> new UlyssesComm(groups.getThreadGroup(DeviceKind.CPU, ids, rank)));
                List<Tensor> locals = pool.onRanks(rank -> slice(whole, 1, rank));
                try {
                    check(label, dt, x, whole, pool, comms, locals);
                    for (int run = 0; run < options.runs(); run++) {
                        Samples measured = new Samples("DTensor.redistribute");
                        Samples baseline = new Samples("UlyssesComm.ulyssesScatterHeads");
                        for (int round = -1; round < options.rounds(); round++) { // round -1 warms up; odd rounds take the baseline first
                            for (int part = 0; part < 2; part++) {
                                boolean runtime = part == (round & 1);
                                for (int i = 0; i < PER_ROUND; i++) {
                                    long t = runtime ? timeRedistribute(dt, x) : timeHelper(pool, comms, locals);
                                    if (round >= 0) {
                                        (runtime ? measured : baseline).add(t);
                                    }
                                }
                            }
                        }
                        row.add(measured, baseline);
                    }
                    check(label, dt, x, whole, pool, comms, locals);
                } finally {
                    locals.forEach(Tensor::close);
                }
            }
        }
        return row;
    }

    /** One {@code S(1) -> S(2)} of {@code x} through the runtime, from issue to {@code sync()}, in ns. */
    private static long timeRedistribute(DTorch dt, DTensor x) {
        long start = System.nanoTime();
        x.redistribute(Placement.shard(2)).close();
        dt.sync();
        return System.nanoTime() - start;
    }

    /**
     * One {@code ulyssesScatterHeads} on every rank thread, from handing the work to the threads to the last one done,
     * in ns: timed on one thread from issue to completion, as the runtime is.
     */
    private static long timeHelper(RankPool pool, List<UlyssesComm> comms, List<Tensor> locals) throws Exception {
        long start = System.nanoTime();
        pool.onRanks(rank -> {
            comms.get(rank).ulyssesScatterHeads(locals.get(rank)).close();
            return null;
        });
        return System.nanoTime() - start;
    }

    /** Both variants give the heads shards of {@code whole}, and their inputs still hold it. */
    private static void check(String label, DTorch dt, DTensor x, Tensor whole, RankPool pool, List<UlyssesComm> comms, List<Tensor> locals)
        throws Exception {
        try (DTensor heads = x.redistribute(Placement.shard(2)); Tensor gathered = heads.toTorch(); Tensor input = x.toTorch()) {
            require(label + ", the runtime's result", whole, gathered);
            require(label + ", the runtime's input", whole, input);
        }
        pool.onRanks(rank -> {
            try (Tensor expectedIn = slice(whole, 1, rank); Tensor expected = slice(whole, 2, rank);
                 Tensor actual = comms.get(rank).ulyssesScatterHeads(locals.get(rank))) {
                require(label + ", UlyssesComm's input on rank " + rank, expectedIn, locals.get(rank));
                require(label + ", UlyssesComm's result on rank " + rank, expected, actual);
            }
            return null;
        });
    }

    private static Tensor slice(Tensor whole, int dim, int rank) {
        long size = whole.size(dim);
        try (Tensor view = whole.narrow(dim, BalancedSplit.offset(size, WORLD, rank), BalancedSplit.size(size, WORLD, rank))) {
            return view.contiguous();
        }
    }

    private static void require(String what, Tensor expected, Tensor actual) {
        if (!actual.equal(expected)) {
            throw new IllegalStateException("Ulysses benchmark: " + what + " differs from the whole tensor's slice");
        }
    }
}
