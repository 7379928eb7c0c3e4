package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.GlobalCommInstanceId;
import org.dtorch.core.device.Cuda;

/**
 * The worker side of a standby worker ({@link StandbyWorkers}): a {@link WorkerMain} started with
 * {@code --standby SOCKET --standby-timeout-ms MS} instead of a run's arguments. It does what every worker does before
 * it knows its run (the JVM's start, libtorch's natives loaded), connects to its reserve's socket, introduces itself
 * ({@code STANDBY}) and waits for its assignment ({@code ASSIGN}): the system properties and the arguments a fresh
 * worker of that run gets on its command line. From then on it is that fresh worker: it connects to the run's control
 * socket and says {@code HELLO} as any other.
 *
 * <pre>
 *   STANDBY := version:int  pid:long
 *   ASSIGN  := properties:int  (name:string value:string)*  arguments:int  (argument:string)*
 * </pre>
 *
 * <p>Nothing that depends on the run is read before the assignment: the instance id ({@value GlobalCommInstanceId#PROPERTY})
 * is checked to be the assigned one, so a class that read it too early fails the start instead of naming another run's
 * files. A standby worker whose reserve closes the connection, whose starter exits, or whose assignment does not come
 * within its timeout exits with {@link WorkerMain#EXIT_STARTUP}, saying which.
 *
 * <p>Not thread-safe: the worker's main thread uses it once, before the worker runs.
 */
final class WorkerStandby {
    /** The properties an assignment may set: the run's own, which a fresh worker gets on its command line. */
    private static final List<String> ASSIGNABLE_PREFIXES = List.of("dtorch.");

    private WorkerStandby() {
    }

    /** Whether {@code args} start a standby worker rather than a run's worker. */
    static boolean isStandby(String[] args) {
        return args.length > 0 && args[0].equals("--standby");
    }

    /**
     * Prepares, reports to the reserve and waits for the assignment; returns the run's worker arguments with the run's
     * system properties set. Exits the process when no assignment comes.
     */
    static String[] awaitAssignment(String[] args) {
        Map<String, String> options = WorkerMain.parse(args, List.of("standby", "standby-timeout-ms"));
        Path socket = Path.of(options.get("standby"));
        Duration limit = Duration.ofMillis(Long.parseLong(options.get("standby-timeout-ms")));
        ControlChannel channel;
        try {
            Cuda.loadNatives(); // first, as in every worker: libtorch decides once whether it has CUDA
            org.bytedeco.javacpp.Loader.load(org.bytedeco.pytorch.global.torch.class);
            WorkerMain.watchParent("standby worker " + ProcessHandle.current().pid());
            SocketChannel connected = SocketChannel.open(StandardProtocolFamily.UNIX);
            connected.connect(UnixDomainSocketAddress.of(socket));
            channel = new ControlChannel(connected, "the standby reserve at " + socket);
            channel.send(ControlChannel.STANDBY, new WireWriter().putInt(WorkerPool.PROTOCOL_VERSION)
                .putLong(ProcessHandle.current().pid()).toByteArray());
        } catch (IOException | RuntimeException | LinkageError e) {
            return exit("standby worker could not report to its reserve at " + socket + ": " + e);
        }
        ControlChannel.Frame frame;
        try {
            frame = WorkerPool.firstFrame(channel, Deadline.after(limit), "standby worker waited for its assignment from " + socket
                + ", which");
        } catch (RuntimeException e) {
            return exit(e.getMessage());
        }
        channel.close();
        try {
            if (frame.type() != ControlChannel.ASSIGN) {
                throw new ProtocolException("expected ASSIGN from the standby reserve at " + socket + ", got a frame of type " + frame.type());
            }
            Assignment assignment = Assignment.decode(frame.reader());
            assignment.properties().forEach(System::setProperty);
            String id = assignment.properties().get(GlobalCommInstanceId.PROPERTY);
            if (id != null && !GlobalCommInstanceId.processPrefix().equals(GlobalCommInstanceId.sanitize(id))) {
                throw new IllegalStateException("the instance id was read before the assignment: " + GlobalCommInstanceId.processPrefix()
                    + ", assigned " + id);
            }
            return assignment.arguments().toArray(String[]::new);
        } catch (RuntimeException e) {
            return exit("standby worker got an assignment it cannot take: " + e.getMessage());
        }
    }

    private static String[] exit(String why) {
        System.err.println(why + "; exiting");
        System.exit(WorkerMain.EXIT_STARTUP);
        return new String[0];
    }

    /**
     * What a standby worker becomes: the system properties and the arguments a fresh worker of the run gets.
     * Thread-safe: immutable.
     */
    record Assignment(Map<String, String> properties, List<String> arguments) {
        Assignment {
            properties = Map.copyOf(properties);
            arguments = List.copyOf(arguments);
            for (String name : properties.keySet()) {
                if (ASSIGNABLE_PREFIXES.stream().noneMatch(name::startsWith)) {
                    throw new IllegalArgumentException("an assignment sets only the run's dtorch.* properties, not " + name);
                }
            }
        }

        byte[] encode() {
            WireWriter out = new WireWriter().putInt(properties.size());
            properties.forEach((name, value) -> out.putString(name).putString(value));
            out.putInt(arguments.size());
            arguments.forEach(out::putString);
            return out.toByteArray();
        }

        static Assignment decode(WireReader in) {
            int count = in.getCount("assigned properties", 1024);
            Map<String, String> properties = new LinkedHashMap<>();
            for (int i = 0; i < count; i++) {
                properties.put(in.getString("property name"), in.getString("property value"));
            }
            int args = in.getCount("assigned arguments", 1024);
            List<String> arguments = new ArrayList<>();
            for (int i = 0; i < args; i++) {
                arguments.add(in.getString("argument"));
            }
            in.expectEnd("ASSIGN");
            return new Assignment(properties, arguments);
        }
    }
}
