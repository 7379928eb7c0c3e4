package org.dtorch.core.communication.group;

import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.stream.Collectors;
import org.dtorch.core.device.DeviceKind;

/**
 * Identifies a communication group: the device kind and the ordered device ids of its ranks (rank i is
 * device {@code deviceIds.get(i)}). Unlike DTorch's fixed array of 12, any number of devices fits.
 *
 * <p>Keys order by {@link #sortKey()}, the order in which {@link ThreadGroupManager} destroys groups.
 *
 * <p>Thread-safe: an immutable value.
 *
 * @param kind      the device kind
 * @param deviceIds the global device ids in rank order; non-empty, distinct, non-negative
 */
public record ThreadGroupKey(DeviceKind kind, List<Long> deviceIds) implements Comparable<ThreadGroupKey> {

    /** Validates and copies the components. */
    public ThreadGroupKey {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(deviceIds, "deviceIds");
        deviceIds = List.copyOf(deviceIds);
        if (deviceIds.isEmpty()) {
            throw new IllegalArgumentException("a group needs at least one device; got no device ids");
        }
        if (new HashSet<>(deviceIds).size() != deviceIds.size()) {
            throw new IllegalArgumentException("device ids of a group must be distinct; got " + deviceIds);
        }
        for (long id : deviceIds) {
            if (id < 0) {
                throw new IllegalArgumentException("device ids must be >= 0; got " + deviceIds);
            }
        }
    }

    /** The number of ranks. */
    public int size() {
        return deviceIds.size();
    }

    /** The rank of {@code deviceId} in this group. */
    public int rankOf(long deviceId) {
        int rank = deviceIds.indexOf(deviceId);
        if (rank < 0) {
            throw new IllegalArgumentException("device " + deviceId + " is not in group " + this);
        }
        return rank;
    }

    /** The string keys sort by: {@code cpu:0,1,2,3}. */
    public String sortKey() {
        return kind.shortName() + ":" + deviceIds.stream().map(String::valueOf).collect(Collectors.joining(","));
    }

    @Override
    public int compareTo(ThreadGroupKey other) {
        return sortKey().compareTo(other.sortKey());
    }

    /** Prints as {@code cpu[0, 1, 2, 3]}. */
    @Override
    public String toString() {
        return kind.shortName() + deviceIds;
    }
}
