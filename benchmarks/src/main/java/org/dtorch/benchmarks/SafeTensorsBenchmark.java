package org.dtorch.benchmarks;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.api.SafeTensors;
import org.dtorch.api.SafeTensors.Layout;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.MemoryStats;

/**
 * Loading a safetensors file onto 4 CPU devices in threads, each device mapping and copying its own shard, against
 * reading the file once sequentially with a plain {@link FileChannel} loop into one reused 1 MiB buffer (what
 * {@code cat file > /dev/null} does). The file ({@value #TENSORS} float32 tensors of 1024 x 1024, 256 MiB) is written by
 * {@link SafeTensors#save} first, so both sides read it from the page cache. Measured per round: {@code load} issued
 * and {@code sync()}ed, then the tensors closed (outside the timing), for {@code [S(0)]} (one contiguous range per
 * device and tensor) and {@code [S(1)]} (strided: one run per row); the baseline alternates with them.
 *
 * <p>Printed besides: the load's bandwidth per device (its shard's bytes over the load's time) and in all, the
 * sequential read's, and the peak host memory a device held during a load ({@code blobs.peak_bytes} above what it held
 * before) and the peak bytes the process mapped ({@code mapped_files.peak_bytes}), from the runtime's memory statistics.
 *
 * <p>Not thread-safe: the harness thread runs it.
 */
final class SafeTensorsBenchmark {
    static final int TENSORS = 64;
    private static final long[] SHAPE = {1024, 1024};
    private static final int WARMUP_ROUNDS = 1;
    private static final int DEVICES = 4;

    private SafeTensorsBenchmark() {
    }

    static void run(Report report, BenchOptions options) {
        int tensors = options.quick() ? 4 : TENSORS;
        long tensorBytes = SHAPE[0] * SHAPE[1] * 4;
        long fileBytes = tensors * tensorBytes;
        report.section("Loading a safetensors file, each device reading its own shard", "safetensors",
            "A " + Unit.size(fileBytes) + " safetensors file of " + tensors + " float32 " + SHAPE[0] + " x " + SHAPE[1] + " tensors (written by "
                + "`SafeTensors.save`, so in the page cache), loaded onto " + DEVICES + " CPU devices in threads: `SafeTensors.load` issued then "
                + "`sync()`; each device maps and copies its own shard (" + Unit.size(tensorBytes / DEVICES) + " of each tensor), a 64 MiB "
                + "window at most. Baseline: one sequential read of the whole file with a FileChannel loop into one 1 MiB buffer "
                + "(`cat file > /dev/null`). `[S(0)]` is one contiguous range per device and tensor; `[S(1)]` one run of "
                + SHAPE[1] / DEVICES * 4 + " bytes per row. Per run " + options.rounds() + " rounds, the variants alternating, after "
                + WARMUP_ROUNDS + " warm-up round.");
        Comparison rows = new Comparison("load " + Unit.size(fileBytes) + " onto 4 devices, [S(0)]", Goal.context("context"));
        Comparison columns = new Comparison("load " + Unit.size(fileBytes) + " onto 4 devices, [S(1)]", Goal.context("context"));
        Figure perDevice = new Figure("[S(0)] load, GB/s per device (its shard over the load's time)", Unit.GIGABYTES_PER_SECOND,
            Goal.context("measured"));
        Figure total = new Figure("[S(0)] load, GB/s in all", Unit.GIGABYTES_PER_SECOND, Goal.context("measured"));
        Figure sequential = new Figure("sequential FileChannel read, GB/s", Unit.GIGABYTES_PER_SECOND, Goal.context("baseline"));
        Figure held = new Figure("peak bytes a device held during an [S(0)] load, MiB (its shards: " + Unit.size(fileBytes / DEVICES) + ")",
            Unit.RATIO, Goal.context("measured"));
        Figure mapped = new Figure("peak bytes mapped by the process during an [S(0)] load, MiB (4 devices, one shard each at most)",
            Unit.RATIO, Goal.context("measured"));
        Path dir;
        try {
            dir = Files.createTempDirectory("dtorch-safetensors-bench");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Path file = dir.resolve("model.safetensors");
        try (DTorch dt = DTorch.init(DTorchOptions.builder().devices(DEVICES).build())) {
            DeviceMesh mesh = dt.defaultMesh();
            write(dt, mesh, file, tensors);
            for (int run = 0; run < options.runs(); run++) {
                Samples loadRows = new Samples("load, [S(0)]");
                Samples loadColumns = new Samples("load, [S(1)]");
                Samples readRows = new Samples("sequential FileChannel read");
                Samples readColumns = new Samples("sequential FileChannel read");
                for (int round = -WARMUP_ROUNDS; round < options.rounds(); round++) {
                    boolean loadFirst = (round & 1) == 0;
                    long r1 = loadFirst ? 0 : sequentialRead(file);
                    long[] before = resetPeaks(dt);
                    long l1 = load(dt, mesh, file, tensors, Placement.shard(0));
                    long[] peaks = peaks(dt, before);
                    r1 = loadFirst ? sequentialRead(file) : r1;
                    long r2 = loadFirst ? 0 : sequentialRead(file);
                    long l2 = load(dt, mesh, file, tensors, Placement.shard(1));
                    r2 = loadFirst ? sequentialRead(file) : r2;
                    if (round >= 0) {
                        loadRows.add(l1);
                        readRows.add(r1);
                        loadColumns.add(l2);
                        readColumns.add(r2);
                        held.add(peaks[0] / (double) (1 << 20));
                        mapped.add(peaks[1] / (double) (1 << 20));
                    }
                }
                rows.add(loadRows, readRows);
                columns.add(loadColumns, readColumns);
                perDevice.add(fileBytes / (double) DEVICES / loadRows.p50());
                total.add(fileBytes / (double) loadRows.p50());
                sequential.add(fileBytes / (double) readRows.p50());
            }
        } finally {
            try {
                Files.deleteIfExists(file);
                Files.deleteIfExists(dir);
            } catch (IOException ignored) {
                // A leftover file in the temporary directory is harmless.
            }
        }
        report.comparisons(List.of(rows, columns));
        report.figures(List.of(perDevice, total, sequential, held, mapped));
    }

    private static void write(DTorch dt, DeviceMesh mesh, Path file, int tensors) {
        Map<String, DTensor> model = new LinkedHashMap<>();
        for (int i = 0; i < tensors; i++) {
            model.put("layers." + i + ".weight", dt.full(i * 0.5, SHAPE, mesh, Placement.shard(0)));
        }
        SafeTensors.save(dt, file, model);
        model.values().forEach(DTensor::close);
    }

    private static long load(DTorch dt, DeviceMesh mesh, Path file, int tensors, Placement placement) {
        Map<String, Layout> layouts = new LinkedHashMap<>();
        for (int i = 0; i < tensors; i++) {
            layouts.put("layers." + i + ".weight", Layout.of(mesh, placement));
        }
        long start = System.nanoTime();
        Map<String, DTensor> loaded = SafeTensors.load(dt, file, layouts, true);
        dt.sync();
        long elapsed = System.nanoTime() - start;
        loaded.values().forEach(DTensor::close);
        dt.sync();
        return elapsed;
    }

    private static long[] resetPeaks(DTorch dt) {
        long[] live = new long[DEVICES];
        for (int d = 0; d < DEVICES; d++) {
            live[d] = dt.resetPeakMemoryStats(d).blobLiveBytes();
        }
        return live;
    }

    /** The most bytes a device held above {@code before}, and the peak bytes the process mapped. */
    private static long[] peaks(DTorch dt, long[] before) {
        long held = 0;
        long mapped = 0;
        for (int d = 0; d < DEVICES; d++) {
            MemoryStats stats = dt.memoryStats(d);
            held = Math.max(held, stats.blobPeakBytes() - before[d]);
            mapped = Math.max(mapped, stats.fileMappedPeakBytes());
        }
        return new long[] {held, mapped};
    }

    /** Reads {@code file} once from start to end into one reused buffer, as {@code cat > /dev/null} does. */
    private static long sequentialRead(Path file) {
        ByteBuffer buffer = ByteBuffer.allocateDirect(1 << 20);
        long start = System.nanoTime();
        long total = 0;
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            int n;
            while ((n = channel.read(buffer)) >= 0) {
                total += n;
                buffer.clear();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        long elapsed = System.nanoTime() - start;
        if (total != fileSize(file)) {
            throw new IllegalStateException("read " + total + " bytes of " + file);
        }
        return elapsed;
    }

    private static long fileSize(Path file) {
        try {
            return Files.size(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
