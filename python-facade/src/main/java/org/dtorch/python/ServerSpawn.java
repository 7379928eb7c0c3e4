package org.dtorch.python;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Starts the warm runtime server ({@link RunServer}) after a direct run, for the runs that follow: the {@code dtorch}
 * script names the socket in {@value #SOCKET_ENV} when no server answers there. The server is this JVM's own command
 * with {@link RunServer} as the main class, in a session of its own ({@code setsid}, where the system has it) so that
 * the terminal's signals do not reach it, its output appended to the socket's {@code .log} file. Starting it after the
 * run, not beside it, leaves the direct run's time as it was.
 *
 * <p>Not thread-safe: the launcher's main thread calls it once, at its end.
 */
final class ServerSpawn {
    /** Environment variable the {@code dtorch} script sets for the launcher: the socket a new server should serve. */
    static final String SOCKET_ENV = "DTORCH_SERVER_SOCKET";
    private static final Path SETSID = Path.of("/usr/bin/setsid");

    private ServerSpawn() {
    }

    /** Starts a server on the socket {@code env} names, if it names one; never fails the run (a warning at most). */
    static void afterRun(Map<String, String> env) {
        String socket = env.get(SOCKET_ENV);
        if (socket == null || socket.isBlank()) {
            return;
        }
        Optional<List<String>> command = serverCommand(socket);
        if (command.isEmpty()) {
            return;
        }
        try {
            Path dir = Path.of(socket).getParent();
            Files.createDirectories(dir);
            ProcessBuilder builder = new ProcessBuilder(command.get())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .redirectOutput(ProcessBuilder.Redirect.appendTo(new File(socket + ".log")))
                .redirectErrorStream(true);
            builder.environment().remove(SOCKET_ENV);
            builder.start();
        } catch (IOException | RuntimeException e) {
            System.err.println("dtorch: warning: cannot start the runtime server on " + socket + " (" + e.getMessage()
                + "); the next run starts directly too");
        }
    }

    /** This JVM's command line with {@link RunServer} and the socket in place of the main class and its arguments. */
    private static Optional<List<String>> serverCommand(String socket) {
        ProcessHandle.Info info = ProcessHandle.current().info();
        if (info.command().isEmpty() || info.arguments().isEmpty()) {
            return Optional.empty();
        }
        List<String> arguments = List.of(info.arguments().get());
        int main = arguments.indexOf(Launcher.class.getName());
        if (main < 0) {
            return Optional.empty(); // not started as the launcher (a test calling main): no server
        }
        List<String> command = new ArrayList<>();
        if (Files.isExecutable(SETSID)) {
            command.add(SETSID.toString());
        }
        command.add(info.command().get());
        command.addAll(arguments.subList(0, main));
        command.add(RunServer.class.getName());
        command.add(socket);
        return Optional.of(command);
    }
}
