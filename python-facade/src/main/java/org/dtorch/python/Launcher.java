package org.dtorch.python;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;

/**
 * {@code dtorch run [--devices cpu:4] [--same-device] [--per-device-process] [--timeout-seconds N] [--log-level LEVEL]
 * script.py [args...]}: runs a Python script on a DTorch runtime and exits with the script's exit code.
 * {@code --per-device-process} gives every device a worker process of its own instead of a thread. {@code --probe-jit} prints
 * the GraalPy engine's implementation ({@code GraalVM CE} when the optimizing JIT is on) and exits.
 *
 * <p>Not thread-safe: a program entry point.
 */
public final class Launcher {
    private static final String USAGE = "usage: dtorch run [--devices cpu:N] [--same-device] [--per-device-process] "
        + "[--timeout-seconds N] [--log-level LEVEL] script.py [args...]";

    private Launcher() {
    }

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs the command line; returns the exit code. */
    static int run(String[] args) {
        List<String> rest = new ArrayList<>(List.of(args));
        if (rest.contains("--probe-jit")) {
            try (PythonHost host = PythonHost.builder().build()) {
                System.out.println(host.engineImplementation());
            }
            return 0;
        }
        if (rest.isEmpty() || !rest.getFirst().equals("run")) {
            System.err.println(USAGE);
            return 2;
        }
        rest.removeFirst();
        DTorchOptions.Builder options = DTorchOptions.builder();
        while (!rest.isEmpty() && rest.getFirst().startsWith("--")) {
            String flag = rest.removeFirst();
            switch (flag) {
                case "--devices" -> {
                    String value = take(rest, flag);
                    String[] parts = value.split(":");
                    if (parts.length != 2 || !parts[0].equals("cpu")) {
                        System.err.println("dtorch: --devices takes cpu:N (GPUs come with the GPU issue), got " + value);
                        return 2;
                    }
                    options.devices(Integer.parseInt(parts[1]));
                }
                case "--same-device" -> options.sameDevice(true);
                case "--per-device-process" -> options.perDevicePerProcess(true);
                case "--timeout-seconds" -> options.timeout(Duration.ofSeconds(Long.parseLong(take(rest, flag))));
                case "--log-level" -> Logger.getLogger("").setLevel(Level.parse(take(rest, flag).toUpperCase(java.util.Locale.ROOT)));
                default -> {
                    System.err.println("dtorch: unknown option " + flag + "\n" + USAGE);
                    return 2;
                }
            }
        }
        if (rest.isEmpty()) {
            System.err.println(USAGE);
            return 2;
        }
        Path script = Path.of(rest.removeFirst());
        if (!Files.isReadable(script)) {
            System.err.println("dtorch: cannot read " + script);
            return 2;
        }
        try (DTorch runtime = DTorch.init(options.build());
             PythonHost host = PythonHost.builder().bridge(new PyBridge(runtime)).build()) {
            return host.runScript(script, rest);
        }
    }

    private static String take(List<String> rest, String flag) {
        if (rest.isEmpty()) {
            throw new IllegalArgumentException(flag + " needs a value");
        }
        return rest.removeFirst();
    }
}
