package org.dtorch.core.communication.channel;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.CommException;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.device.Device;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The producer side of a {@link WorkerTensorChannel}: stages a structure's tensors in shared memory and returns the
 * {@link WorkerTensorRef} that names them: CPU tensors in shared memory ({@link ShmChannelSlots}), CUDA tensors in a
 * pool lent through CUDA IPC ({@link CudaChannelSlots}). A leaf's profile is (its index in the structure, shape, dtype, device);
 * the first {@link ChannelOptions#maxProfiles()} profiles get a persistent region of two slots used round-robin, and
 * staging into a slot first waits until every consumer rank acknowledged the slot's previous generation, so the
 * producer runs at most two publishes of a profile ahead of its slowest consumer. Later profiles go through a region
 * per transfer ({@link FallbackRegions}) and never wait.
 *
 * <p>Not thread-safe: one producer thread.
 */
public final class ChannelProducer implements AutoCloseable {
    private static final int REF_MESSAGE = 1;
    /** The sleep between tries while a consumer's ref queue is full: queue space is freed by a reader, which does not signal. */
    private static final long QUEUE_FULL_PARK_NANOS = 100_000L;

    private final ChannelControl control;
    private final Map<ProfileKey, Profile> profiles = new HashMap<>();
    private final List<OneToOneRingBuffer> queues = new ArrayList<>();
    private long sequence;
    private boolean closed;

    /** A profile: where a leaf of one (index, shape, dtype, device) lives, and how often it was staged. */
    private record ProfileKey(int leafIndex, List<Long> shape, int dtype, String device) {
    }

    private static final class Profile {
        final int index;
        final ChannelSlots slots;
        long uses;

        Profile(int index, ChannelSlots slots) {
            this.index = index;
            this.slots = slots;
        }
    }

    private ChannelProducer(ChannelControl control) {
        this.control = control;
        for (int r = 0; r < control.layout().consumers(); r++) {
            queues.add(control.queue(r));
        }
    }

    static ChannelProducer attach(ChannelOptions options) {
        ChannelControl control = ChannelControl.attach(options);
        try {
            control.checkOpen("attaching a producer");
            control.attachProducer();
            return new ChannelProducer(control);
        } catch (RuntimeException e) {
            control.close();
            throw e;
        }
    }

    /** Publishes {@code value} whole to every consumer rank; see {@link #publish(Object, int)}. */
    public WorkerTensorRef publish(Object value) {
        return stage(value, -1, false);
    }

    /**
     * Stages {@code value}'s tensors and returns the ref that names them; each consumer rank gets only its
     * {@code BalancedSplit} share of dimension {@code shardDim} of every tensor (negative counts from the end). The
     * tensors are staged once, whatever the number of consumers. May wait (up to the channel's timeout) for the ACKs
     * of a slot's previous generation.
     *
     * @throws IllegalArgumentException before anything is staged, for a structure the channel cannot carry, an
     *                                  undefined tensor, or a shard dimension a tensor does not have
     * @throws org.dtorch.core.communication.CommException if the channel failed or closed, or the wait for ACKs
     *                                  failed (a consumer exited or detached, or the deadline passed; the channel is
     *                                  then failed)
     */
    public WorkerTensorRef publish(Object value, int shardDim) {
        return stage(value, shardDim, true);
    }

    private WorkerTensorRef stage(Object value, int shardDim, boolean sharded) {
        checkUsable("publish");
        ChannelStructure.Flat flat = ChannelStructure.flatten(value);
        List<long[]> shapes = new ArrayList<>();
        List<Integer> dims = new ArrayList<>();
        for (int i = 0; i < flat.leaves().size(); i++) {
            Tensor t = flat.leaves().get(i);
            if (t == null || !t.defined()) {
                throw new IllegalArgumentException(control.label() + ": publish takes defined tensors, got an undefined one as leaf " + i);
            }
            long[] shape = TorchTensors.shape(t);
            int dim = sharded ? shardDim < 0 ? shardDim + shape.length : shardDim : -1;
            if (sharded && (dim < 0 || dim >= shape.length)) {
                throw new IllegalArgumentException(control.label() + ": shard dimension " + shardDim + " does not exist in leaf " + i + ", "
                    + TorchTensors.describe(t));
            }
            shapes.add(shape);
            dims.add(dim);
        }
        long seq = sequence + 1;
        Deadline deadline = Deadline.after(control.options().timeout());
        List<WorkerTensorRef.Leaf> leaves = new ArrayList<>();
        try {
            for (int i = 0; i < flat.leaves().size(); i++) {
                leaves.add(stageLeaf(seq, i, flat.leaves().get(i), shapes.get(i), dims.get(i), deadline));
            }
        } catch (CommException e) {
            throw e;
        } catch (RuntimeException e) {
            // Some leaves took a generation no ref will carry: no consumer would ever acknowledge it.
            throw control.fail(control.label() + ": publish #" + seq + " failed after staging began: " + e, false);
        }
        sequence = seq;
        return new WorkerTensorRef(control.options().name(), seq, List.copyOf(leaves), flat.skeleton());
    }

    private WorkerTensorRef.Leaf stageLeaf(long seq, int index, Tensor t, long[] shape, int shardDim, Deadline deadline) {
        int dtype = TorchTensors.dtype(t).value;
        Device device = TorchTensors.device(t);
        int cudaIndex = device.kind() == DeviceKind.CUDA ? device.index() : -1;
        ProfileKey key = new ProfileKey(index, Arrays.stream(shape).boxed().toList(), dtype, device.toString());
        Profile profile = profiles.get(key);
        if (profile == null && profiles.size() < control.options().maxProfiles()) {
            int n = profiles.size();
            String name = control.controlName() + "-p" + n;
            long bytes = ShmTensors.byteSize(shape, TorchTensors.dtype(t));
            profile = new Profile(n, cudaIndex >= 0
                ? CudaChannelSlots.create(name, device, bytes, control, n)
                : ShmChannelSlots.create(name, bytes));
            profiles.put(key, profile);
        }
        if (profile == null) {
            // Past the bound a CUDA leaf goes through host memory too; the consumer moves it back to the device.
            String name = control.controlName() + "-f" + seq + "-" + index;
            try (Tensor host = TorchTensors.to(t, Device.cpu(0))) {
                if (cudaIndex >= 0) {
                    WorkerTensorChannel.countDeviceCopy();
                }
                FallbackRegions.stage(name, host, shape, control.layout().consumers());
            }
            return new WorkerTensorRef.Leaf(WorkerTensorRef.Leaf.FALLBACK, 0, 0, dtype, shape, FallbackRegions.DATA_OFFSET, shardDim, name,
                cudaIndex, new byte[0]);
        }
        long generation = profile.uses + 1;
        int slot = (int) ((generation - 1) % ChannelLayout.SLOTS);
        if (generation > ChannelLayout.SLOTS) {
            control.awaitAcks(profile.index, slot, generation - ChannelLayout.SLOTS, deadline);
        }
        profile.slots.stage(slot, t);
        profile.uses = generation;
        return new WorkerTensorRef.Leaf(profile.index, slot, generation, dtype, shape, profile.slots.slotOffset(slot), shardDim,
            profile.slots.name(), cudaIndex, profile.slots.handles(slot));
    }

    /**
     * Puts {@code ref} on every consumer rank's queue, for {@link ChannelConsumer#receive()}; waits (up to the channel's
     * timeout) while a queue is full. Refs may instead travel by hand ({@link WorkerTensorRef#toBytes()}); a consumer
     * takes them one way or the other, not both.
     *
     * @throws IllegalArgumentException if the serialized ref is larger than a queue message may be
     */
    public void enqueue(WorkerTensorRef ref) {
        checkUsable("enqueue");
        byte[] bytes = ref.toBytes();
        if (bytes.length > queues.getFirst().maxMsgLength()) {
            throw new IllegalArgumentException(control.label() + ": " + ref + " takes " + bytes.length
                + " bytes, a ref queue message at most " + queues.getFirst().maxMsgLength()
                + ": pass it by hand or make the queues larger");
        }
        UnsafeBuffer message = new UnsafeBuffer(bytes);
        Deadline deadline = Deadline.after(control.options().timeout());
        for (int r = 0; r < queues.size(); r++) {
            while (!queues.get(r).write(REF_MESSAGE, message, 0, bytes.length)) {
                control.checkOpen("enqueueing " + ref + " for consumer rank " + r);
                if (deadline.expired()) {
                    throw control.fail(control.label() + ": the ref queue of consumer rank " + r + " stayed full while enqueueing " + ref
                        + "; " + deadline.timedOutAfter(), true);
                }
                LockSupport.parkNanos(QUEUE_FULL_PARK_NANOS);
            }
            control.signalRef(r);
        }
    }

    private void checkUsable(String operation) {
        if (closed) {
            throw new IllegalStateException(control.label() + ": " + operation + " on a closed producer");
        }
        control.checkOpen(operation);
    }

    /**
     * Detaches the producer and unmaps its profile regions here. The regions stay until the channel closes, so refs
     * published before stay resolvable (a producer worker may finish before its consumers); a consumer waiting in
     * {@link ChannelConsumer#receive()} on an empty queue then fails at once naming the detached producer. A CUDA pool
     * is this process's memory, so before giving it back the close waits (up to the channel's timeout) until every
     * consumer rank still attached acknowledged each slot's last generation and its copies finished; past the
     * deadline it marks the channel failed and releases anyway. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        control.detachProducer();
        try {
            ChannelSlots.closeAll(profiles.values().stream().map(p -> p.slots).toList());
        } finally {
            profiles.clear();
            control.close();
        }
    }
}
