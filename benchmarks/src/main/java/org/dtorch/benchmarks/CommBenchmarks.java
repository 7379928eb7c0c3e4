package org.dtorch.benchmarks;

/**
 * Runs the selected benchmarks and writes their tables to a Markdown report.
 *
 * <p>Usage: {@code CommBenchmarks [all|store,future,allreduce,redistribute,pipeline,process,python,channel,stagechannel|gpu|
 * channelcuda|multigpu|speed|gloocopy|gloorings|gathers|ulysses|trace|network|networksmall|rendezvous] [report.md]}, with
 * the options of {@link BenchOptions} as system properties; docs/benchmarks.md gives the Maven command and
 * {@code benchmarks/run-all.sh} runs everything. A harness that fails is reported and the others still run;
 * the exit status is then 1.
 *
 * <p>Thread-safe: stateless; {@code main} runs the harnesses one after another.
 */
public final class CommBenchmarks {

    private CommBenchmarks() {
    }

    /** A harness: measures, and writes its tables to the report. */
    private interface Harness {
        void run(Report report, BenchOptions options) throws Exception;
    }

    public static void main(String[] args) {
        BenchOptions options = BenchOptions.fromSystem(args);
        Report report = new Report(Provenance.detect(options.root()), options);
        int failed = 0;
        for (String name : options.selected()) {
            try {
                harness(name).run(report, options);
            } catch (Exception e) {
                failed++;
                System.err.println("benchmark " + name + " failed:");
                e.printStackTrace();
                report.note("**Benchmark `" + name + "` failed:** " + e);
            }
        }
        System.out.println("report written to " + options.report().toAbsolutePath());
        System.exit(failed == 0 ? 0 : 1);
    }

    private static Harness harness(String name) {
        return switch (name) {
            case "store" -> StoreHandoffBenchmark::run;
            case "future" -> FutureWakeupBenchmark::run;
            case "allreduce" -> AllReduceBenchmark::run;
            case "redistribute" -> RedistributionBenchmark::run;
            case "pipeline" -> PipelineBenchmark::run;
            case "process" -> ProcessBenchmark::run;
            case "python" -> PythonBenchmark::run;
            case "channel" -> ChannelBenchmark::run;
            case "stagechannel" -> StageChannelBenchmark::run;
            case "matmul" -> MatmulBenchmark::run;
            case "gpu" -> GpuBenchmark::run;
            case "multigpu" -> MultiGpuBenchmark::run;
            case "channelcuda" -> ChannelCudaBenchmark::run;
            case "speed" -> SpeedBenchmark::run;
            case "gloocopy" -> GlooCopyBenchmark::run;
            case "gloorings" -> GlooRingBenchmark::run;
            case "gathers" -> GatherBenchmark::run;
            case "ulysses" -> UlyssesBenchmark::run;
            case "trace" -> TraceBenchmark::run;
            case "network" -> NetworkStoreBenchmark::run;
            case "networksmall" -> NetworkSmallBenchmark::run;
            case "rendezvous" -> RendezvousBenchmark::run;
            case "nodes" -> NodesBenchmark::run;
            case "implicit" -> ImplicitBenchmark::run;
            case "safetensors" -> SafeTensorsBenchmark::run;
            default -> throw new IllegalArgumentException("no harness named " + name + "; choose from " + BenchOptions.BENCHMARKS);
        };
    }
}
