package org.dtorch.core.communication.store;

/**
 * Where a c10d {@code TCPStore} server listens: the rendezvous of {@link NetworkTensorStore}s and of the
 * participant check of {@link TensorStore#createForParticipants} (docs/communication-core.md, "NetworkTensorStore").
 * The multi-node runtime serves one per run, on node 0 ({@link RendezvousServer}); torchrun's
 * {@code MASTER_ADDR:MASTER_PORT} is the same thing.
 *
 * <p>Thread-safe: immutable.
 *
 * @param host the server's host name or address, as every participant reaches it
 * @param port its TCP port, 1 to 65535
 */
public record RendezvousAddress(String host, int port) {

    /** Validates the components. */
    public RendezvousAddress {
        if (host == null || host.isBlank() || host.strip().length() != host.length()) {
            throw new IllegalArgumentException("rendezvous host must be a host name or address, got "
                + (host == null ? "null" : "'" + host + "'"));
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("rendezvous port of " + host + " must be in [1, 65535], got " + port);
        }
    }

    /**
     * Parses {@code host:port} ({@code [v6-address]:port} for an IPv6 address).
     *
     * @throws IllegalArgumentException naming the text when it is not of that form
     */
    public static RendezvousAddress parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("rendezvous address must be host:port, got null");
        }
        int colon = text.lastIndexOf(':');
        String host = colon < 0 ? "" : text.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        try {
            return new RendezvousAddress(host, Integer.parseInt(text.substring(colon + 1)));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("rendezvous address must be host:port, got '" + text + "'", e);
        }
    }

    /** {@code host:port}, or {@code [host]:port} for an IPv6 address. */
    @Override
    public String toString() {
        return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
    }
}
