package org.dtorch.benchmarks;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A sampling profiler for Java runtimes without Flight Recorder (the GPU machine's linked runtime has no
 * {@code jdk.jfr}): runs another main class and, every {@code sampler.intervalMicros} (default 1000), takes the stacks
 * of the threads whose names start with one of {@code sampler.threads} (default {@code dtorch-worker,main}); at exit it
 * prints, per thread group, the most frequent top frames and the most frequent frames anywhere on the stack (inclusive
 * counts) to {@code sampler.out} (default standard error). Stacks are taken at safepoints, so a frame that runs without
 * one is charged to the next; a thread in native code shows the Java method that called it, which is what it is for:
 * which JNI calls a worker spends its time in.
 *
 * <p>{@code java ... org.dtorch.benchmarks.StackSampler org.dtorch.python.Launcher run script.py}
 *
 * <p>Thread-safe: one sampling thread owns the counts; the exit hook reads them after stopping it.
 */
public final class StackSampler {
    private static final int TOP = 40;

    private final Map<String, Map<String, Integer>> topFrames = new HashMap<>();
    private final Map<String, Map<String, Integer>> anyFrames = new HashMap<>();
    private final Map<String, Integer> samples = new HashMap<>();
    private final List<String> prefixes;
    private final int depth;
    private volatile boolean running = true;

    private StackSampler(List<String> prefixes, int depth) {
        this.prefixes = prefixes;
        this.depth = depth;
    }

    /** Runs {@code args[0]}'s main with the rest of {@code args}, sampling as the class comment says. */
    public static void main(String[] args) throws Throwable {
        if (args.length == 0) {
            System.err.println("usage: StackSampler MAIN_CLASS [ARGS...]");
            System.exit(2);
        }
        List<String> prefixes = List.of(System.getProperty("sampler.threads", "dtorch-worker,main").split(","));
        long intervalNanos = Long.getLong("sampler.intervalMicros", 1000) * 1000;
        StackSampler sampler = new StackSampler(prefixes, Integer.getInteger("sampler.depth", 1));
        Thread thread = new Thread(() -> sampler.loop(intervalNanos), "stack-sampler");
        thread.setDaemon(true);
        thread.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            sampler.running = false;
            try {
                thread.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            sampler.report();
        }));
        try {
            Class.forName(args[0]).getMethod("main", String[].class).invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    private void loop(long intervalNanos) {
        while (running) {
            for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
                String group = group(e.getKey().getName());
                StackTraceElement[] stack = e.getValue();
                if (group == null || stack.length == 0 || e.getKey().getState() != Thread.State.RUNNABLE) {
                    continue;
                }
                synchronized (this) {
                    samples.merge(group, 1, Integer::sum);
                    StringBuilder top = new StringBuilder();
                    for (int i = 0; i < Math.min(depth, stack.length); i++) {
                        top.append(i == 0 ? "" : " <- ").append(frame(stack[i]));
                    }
                    topFrames.computeIfAbsent(group, g -> new HashMap<>()).merge(top.toString(), 1, Integer::sum);
                    Map<String, Integer> any = anyFrames.computeIfAbsent(group, g -> new HashMap<>());
                    for (String f : Arrays.stream(stack).map(StackSampler::frame).distinct().toList()) {
                        any.merge(f, 1, Integer::sum);
                    }
                }
            }
            long until = System.nanoTime() + intervalNanos;
            while (System.nanoTime() < until && running) {
                Thread.onSpinWait();
                if (until - System.nanoTime() > 200_000) {
                    try {
                        Thread.sleep(0, 100_000);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }
    }

    private String group(String name) {
        for (String p : prefixes) {
            if (name.startsWith(p)) {
                return p;
            }
        }
        return null;
    }

    private static String frame(StackTraceElement e) {
        String cls = e.getClassName();
        return cls.substring(cls.lastIndexOf('.') + 1) + "." + e.getMethodName();
    }

    private synchronized void report() {
        String out = System.getProperty("sampler.out");
        try (PrintStream ps = out == null ? new PrintStream(System.err, true) : new PrintStream(Files.newOutputStream(Path.of(out)))) {
            for (String group : samples.keySet()) {
                int n = samples.get(group);
                ps.println("== " + group + ": " + n + " samples (runnable)");
                ps.println("-- top frames");
                print(ps, topFrames.get(group), n);
                ps.println("-- frames anywhere on the stack");
                print(ps, anyFrames.get(group), n);
            }
        } catch (IOException e) {
            System.err.println("StackSampler: cannot write " + out + ": " + e);
        }
    }

    private static void print(PrintStream ps, Map<String, Integer> counts, int total) {
        List<Map.Entry<String, Integer>> entries = new ArrayList<>(counts.entrySet());
        entries.sort((a, b) -> b.getValue() - a.getValue());
        for (Map.Entry<String, Integer> e : entries.subList(0, Math.min(TOP, entries.size()))) {
            ps.printf("%6d %5.1f%%  %s%n", e.getValue(), 100.0 * e.getValue() / total, e.getKey());
        }
    }
}
