package org.dtorch.core.communication.store;

import java.time.Duration;
import java.util.Objects;
import org.dtorch.core.communication.CommOptions;
import org.dtorch.core.communication.GlobalCommInstanceId;

/**
 * What {@link TensorStore#create(TensorStoreCreateInfo)} needs: the backend, the store key that all
 * participants share, the number of participants, this participant's rank, and the deadline of every
 * blocking call on the store; for stores that span processes, the runtime instance that names their shared
 * memory; for stores that span hosts, the rendezvous they meet at and this participant's host identity.
 *
 * <p>Thread-safe: immutable.
 */
public final class TensorStoreCreateInfo {
    private final TensorStoreType type;
    private final String storeKey;
    private final int worldSize;
    private final int rank;
    private final Duration timeout;
    private final String instanceId;
    private final RendezvousAddress rendezvous;
    private final String hostId;

    private TensorStoreCreateInfo(Builder b) {
        this.type = Objects.requireNonNull(b.type, "type");
        if (b.storeKey == null || b.storeKey.isBlank()) {
            throw new IllegalArgumentException("storeKey must be a non-blank string, got " + (b.storeKey == null ? "null" : "'" + b.storeKey + "'"));
        }
        if (b.worldSize < 1) {
            throw new IllegalArgumentException("worldSize of store '" + b.storeKey + "' must be >= 1, got " + b.worldSize);
        }
        if (b.rank < 0 || b.rank >= b.worldSize) {
            throw new IllegalArgumentException("rank of store '" + b.storeKey + "' must be in [0, " + b.worldSize + "), got " + b.rank);
        }
        this.storeKey = b.storeKey;
        this.worldSize = b.worldSize;
        this.rank = b.rank;
        this.timeout = CommOptions.validateTimeout(b.timeout == null ? CommOptions.global().timeout() : b.timeout);
        if (b.instanceId != null && b.instanceId.isBlank()) {
            throw new IllegalArgumentException("instanceId of store '" + b.storeKey + "' must be non-blank when given");
        }
        this.instanceId = GlobalCommInstanceId.sanitize(b.instanceId == null ? GlobalCommInstanceId.processPrefix() : b.instanceId);
        this.rendezvous = b.rendezvous;
        if (type == TensorStoreType.NETWORK && rendezvous == null) {
            throw new IllegalArgumentException("store '" + b.storeKey + "' (rank " + b.rank + "): a Network store needs the rendezvous "
                + "address its participants meet at (Builder.rendezvous)");
        }
        String host = b.hostId == null ? HostIdentity.local() : b.hostId;
        if (host.isBlank() || host.indexOf('\t') >= 0 || host.indexOf('\n') >= 0) {
            throw new IllegalArgumentException("hostId of store '" + b.storeKey + "' must be non-blank, without tabs or newlines, got '"
                + host + "'");
        }
        this.hostId = host;
    }

    /** A builder with type {@link TensorStoreType#MEMORY}, rank 0 and the global timeout. */
    public static Builder builder() {
        return new Builder();
    }

    /** The backend. */
    public TensorStoreType type() {
        return type;
    }

    /** The key that all participants of the store share. */
    public String storeKey() {
        return storeKey;
    }

    /** The number of participants. */
    public int worldSize() {
        return worldSize;
    }

    /** This participant's rank, in {@code [0, worldSize)}. */
    public int rank() {
        return rank;
    }

    /** The deadline of every blocking call. */
    public Duration timeout() {
        return timeout;
    }

    /**
     * The runtime instance whose shared-memory objects this store's are (File backend): processes meet
     * only if they share it, and files left by an instance whose process died are removed by the next
     * runtime that starts ({@link org.dtorch.core.shm.ShmJanitor}).
     */
    public String instanceId() {
        return instanceId;
    }

    /**
     * Where the participants of a store that may span hosts meet: the c10d {@code TCPStore} server of the Network
     * backend, and of {@link TensorStore#createForParticipants}'s check; null when the store stays on one host.
     */
    public RendezvousAddress rendezvous() {
        return rendezvous;
    }

    /**
     * This participant's host identity ({@link HostIdentity}): what {@link TensorStore#createForParticipants} compares,
     * and what the Network backend's errors name.
     */
    public String hostId() {
        return hostId;
    }

    /** A builder of a copy of this info for another rank. */
    public Builder toBuilder() {
        return builder().type(type).storeKey(storeKey).worldSize(worldSize).rank(rank).timeout(timeout).instanceId(instanceId)
            .rendezvous(rendezvous).hostId(hostId);
    }

    @Override
    public String toString() {
        return "TensorStoreCreateInfo{" + type + ", '" + storeKey + "', rank " + rank + " of " + worldSize + ", timeout " + timeout
            + ", instance " + instanceId + ", host '" + hostId + "'" + (rendezvous == null ? "" : ", rendezvous " + rendezvous) + "}";
    }

    /**
     * Builds a {@link TensorStoreCreateInfo}; {@link #build()} validates.
     *
     * <p>Not thread-safe: one thread fills a builder.
     */
    public static final class Builder {
        private TensorStoreType type = TensorStoreType.MEMORY;
        private String storeKey;
        private int worldSize;
        private int rank;
        private Duration timeout;
        private String instanceId;
        private RendezvousAddress rendezvous;
        private String hostId;

        private Builder() {
        }

        /** The backend; default {@link TensorStoreType#MEMORY}. */
        public Builder type(TensorStoreType value) {
            this.type = value;
            return this;
        }

        /** The key all participants share; required. */
        public Builder storeKey(String value) {
            this.storeKey = value;
            return this;
        }

        /** The number of participants; required, at least 1. */
        public Builder worldSize(int value) {
            this.worldSize = value;
            return this;
        }

        /** This participant's rank; default 0. */
        public Builder rank(int value) {
            this.rank = value;
            return this;
        }

        /** The deadline of every blocking call; default {@link CommOptions#timeout()} of the global options. */
        public Builder timeout(Duration value) {
            this.timeout = value;
            return this;
        }

        /**
         * The runtime instance that namespaces the store's shared memory; default
         * {@link GlobalCommInstanceId#processPrefix()} (which a controller sets for its workers, so they meet).
         */
        public Builder instanceId(String value) {
            this.instanceId = value;
            return this;
        }

        /** The rendezvous of a store that may span hosts; required for {@link TensorStoreType#NETWORK}, else optional. */
        public Builder rendezvous(RendezvousAddress value) {
            this.rendezvous = value;
            return this;
        }

        /** This participant's host identity; default {@link HostIdentity#local()}. */
        public Builder hostId(String value) {
            this.hostId = value;
            return this;
        }

        /** The validated info. */
        public TensorStoreCreateInfo build() {
            return new TensorStoreCreateInfo(this);
        }
    }
}
