package org.dtorch.python;

import java.nio.file.Path;
import java.util.Map;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.NodeSpec;
import org.dtorch.core.shm.UnsafePathException;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * The launcher's options for a run across nodes, torchrun's: {@code --nnodes}, {@code --node-rank}, {@code --master-addr},
 * {@code --master-port} (each, when absent, from the environment variable torchrun reads: {@link #ENVIRONMENT}) and
 * {@code --token-file}. Every node runs the same command line but its node rank; node 0 runs the script and the
 * controller, every other node serves its devices ({@code NodeAgent}).
 *
 * <p>Not thread-safe: filled once by picocli, then read.
 */
final class NodeOptions {
    /** torchrun's port for the rendezvous. */
    static final int DEFAULT_MASTER_PORT = 29500;
    /** The environment variable each option falls back on. */
    static final Map<String, String> ENVIRONMENT = Map.of("--nnodes", "NNODES", "--node-rank", "NODE_RANK", "--master-addr",
        "MASTER_ADDR", "--master-port", "MASTER_PORT");

    @Option(names = "--nnodes", paramLabel = "N", converter = NodesConverter.class, defaultValue = "1",
        description = {"Nodes (hosts) of the run, 1 to " + Launcher.MAX_DEVICES + " (default 1, or NNODES). Run the same command",
            "on every node; node 0 runs the script, the others serve their devices."})
    private int nodes;

    @Option(names = "--node-rank", paramLabel = "R", converter = NodeRankConverter.class, defaultValue = "0",
        description = "This node's rank, 0 to N-1 (default 0, or NODE_RANK).")
    private int nodeRank;

    @Option(names = "--master-addr", paramLabel = "HOST", converter = HostConverter.class, defaultValue = "127.0.0.1",
        description = {"Node 0's address as every node reaches it (default 127.0.0.1, or",
            "MASTER_ADDR); node 0 listens there (rendezvous and control port)."})
    private String masterAddr;

    @Option(names = "--master-port", paramLabel = "PORT", converter = PortConverter.class, defaultValue = "" + DEFAULT_MASTER_PORT,
        description = "The rendezvous port at HOST, 1 to 65535 (default " + DEFAULT_MASTER_PORT + ", or MASTER_PORT).")
    private int masterPort;

    @Option(names = "--token-file", paramLabel = "FILE", description = {
        "The run's shared token (mode 0600, at least " + ClusterToken.MIN_BYTES + " bytes); without it, the",
        "environment variable " + ClusterToken.ENV + ". Needed with N > 1."})
    private Path tokenFile;

    /** The first variable {@link #environmentDefaults} found not valid, said in one line; reported by {@link #problem}. */
    private String environmentProblem;

    /** How many nodes the run has. */
    int nodes() {
        return nodes;
    }

    /** This node's rank. */
    int nodeRank() {
        return nodeRank;
    }

    /** Why these options cannot run with the others, or null; before anything starts. */
    String problem(boolean sameDevice, boolean perDeviceProcess) {
        if (environmentProblem != null) {
            return environmentProblem;
        }
        if (nodeRank >= nodes) {
            return "node rank " + nodeRank + " (--node-rank or NODE_RANK) is not a node of a run of " + nodes + " node"
                + (nodes == 1 ? "" : "s") + " (--nnodes or NNODES): expected 0 to " + (nodes - 1);
        }
        if (nodes > 1 && sameDevice) {
            return "--same-device (or DTORCH_DTENSOR_IN_SAME_DEVICE=1) simulates every device on one device of one host; a run of "
                + nodes + " nodes has distinct devices, each a worker process of its node";
        }
        if (nodes > 1 && perDeviceProcess) {
            return "--per-device-process is implied by --nnodes " + nodes + ": across nodes every device is a worker process already";
        }
        return null;
    }

    /**
     * This node's place in a run of {@code devicesPerNode} devices per node, or null for a run of one node.
     *
     * @throws IllegalArgumentException if the token is missing or too short (its message says what to do)
     * @throws UnsafePathException      if the token file is not private to this user
     */
    NodeSpec spec(int devicesPerNode, Map<String, String> env) {
        if (nodes == 1) {
            return null;
        }
        ClusterToken token = ClusterToken.resolve(nodes, tokenFile, env).orElseThrow();
        return new NodeSpec(nodes, nodeRank, new RendezvousAddress(masterAddr, masterPort), token, devicesPerNode);
    }

    /**
     * Gives each option of {@link #ENVIRONMENT} its variable's value from {@code env} when the command line leaves it
     * out. A value its option's converter refuses leaves the option's default and becomes this command's
     * {@link #problem}, naming the variable: picocli fills defaults before it sees {@code --help}, which must still work.
     */
    CommandLine.IDefaultValueProvider environmentDefaults(Map<String, String> env) {
        return arg -> {
            if (!(arg instanceof CommandLine.Model.OptionSpec option)) {
                return null;
            }
            String variable = ENVIRONMENT.get(option.longestName());
            String value = variable == null ? null : env.get(variable);
            if (value == null) {
                return null;
            }
            try {
                option.converters()[0].convert(value);
                return value;
            } catch (CommandLine.TypeConversionException e) {
                if (environmentProblem == null) {
                    environmentProblem = "the environment variable " + variable + " (read because " + option.longestName()
                        + " is absent) is not valid: " + e.getMessage();
                }
                return null;
            }
        };
    }

    /** A whole number from {@code min} to {@code max}; the message says what is expected. */
    private abstract static class WholeNumberConverter implements CommandLine.ITypeConverter<Integer> {
        private final long min;
        private final long max;
        private final String expected;

        WholeNumberConverter(long min, long max, String expected) {
            this.min = min;
            this.max = max;
            this.expected = expected;
        }

        @Override
        public Integer convert(String value) {
            long number = Launcher.parseWhole(value);
            if (number < min || number > max) {
                throw new CommandLine.TypeConversionException("expected " + expected + ", got '" + value + "'");
            }
            return (int) number;
        }
    }

    /** A node count, 1 to {@link Launcher#MAX_DEVICES}. */
    static final class NodesConverter extends WholeNumberConverter {
        NodesConverter() {
            super(1, Launcher.MAX_DEVICES, "a whole number of nodes from 1 to " + Launcher.MAX_DEVICES);
        }
    }

    /** A node rank, 0 to {@link Launcher#MAX_DEVICES} - 1; whether it is below the node count is checked later. */
    static final class NodeRankConverter extends WholeNumberConverter {
        NodeRankConverter() {
            super(0, Launcher.MAX_DEVICES - 1, "a node rank, a whole number from 0 to the node count - 1");
        }
    }

    /** A TCP port, 1 to 65535. */
    static final class PortConverter extends WholeNumberConverter {
        PortConverter() {
            super(1, 65535, "a TCP port from 1 to 65535");
        }
    }

    /** A host name or address: not empty, no spaces. Whether it is reachable, or this host's, the run finds out. */
    static final class HostConverter implements CommandLine.ITypeConverter<String> {
        @Override
        public String convert(String value) {
            if (value.isEmpty() || value.chars().anyMatch(Character::isWhitespace)) {
                throw new CommandLine.TypeConversionException("expected a host name or address, got '" + value + "'");
            }
            return value;
        }
    }
}
