package org.dtorch.benchmarks;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * Runs the communication-core benchmarks and writes a Markdown report.
 *
 * <p>Usage: {@code CommBenchmarks [all|store,future,allreduce,redistribute,pipeline,process] [report.md]}; see docs/benchmarks.md for
 * the Maven command.
 */
public final class CommBenchmarks {

    private CommBenchmarks() {
    }

    public static void main(String[] args) throws Exception {
        List<String> selected = Arrays.asList((args.length > 0 ? args[0] : "all").split(","));
        Path reportFile = Path.of(args.length > 1 ? args[1] : "target/benchmarks.md");
        boolean all = selected.contains("all");
        Report report = new Report();
        report.note("Machine: " + Runtime.getRuntime().availableProcessors() + " cores, " + System.getProperty("os.name") + " "
            + System.getProperty("os.arch") + ", Java " + Runtime.version());
        if (all || selected.contains("store")) {
            StoreHandoffBenchmark.run(report);
        }
        if (all || selected.contains("future")) {
            FutureWakeupBenchmark.run(report);
        }
        if (all || selected.contains("allreduce")) {
            AllReduceBenchmark.run(report);
        }
        if (all || selected.contains("redistribute")) {
            RedistributionBenchmark.run(report);
        }
        if (all || selected.contains("pipeline")) {
            PipelineBenchmark.run(report);
        }
        if (all || selected.contains("process")) {
            ProcessBenchmark.run(report);
        }
        report.write(reportFile);
        System.out.println("report written to " + reportFile.toAbsolutePath());
        System.exit(0);
    }
}
