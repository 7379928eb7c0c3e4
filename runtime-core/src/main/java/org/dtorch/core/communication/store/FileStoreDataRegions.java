package org.dtorch.core.communication.store;

import org.dtorch.core.tensor.TorchTensors;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.SharedRegion;
import org.dtorch.core.shm.ShmTensors;

/**
 * The shared-memory regions one rank of a {@link FileTensorStore} uses for values too large for an entry: the
 * data regions it produces into ({@code <control>-r<rank>-<n>}), kept in a small pool once their key is waited
 * for, so that their pages are allocated and mapped already when a repeated exchange reuses them; the mappings of
 * other ranks' data regions, a few kept; the regions it allocates for tensors published in place
 * ({@code <control>-a<rank>-<n>}); and its references to such published tensors until their key is waited for.
 *
 * <p>Thread-safe: guarded by this instance.
 */
final class FileStoreDataRegions {
    private static final int POOL_LIMIT = 4;
    private static final int MAPPED_LIMIT = 8;

    /** A data region this rank produced into, and the sequence number in its name. */
    record DataRegion(SharedRegion region, long sequence) {
    }

    private final String controlName;
    private final int rank;
    /** Live keys this rank produced, with their data regions. */
    private final Map<String, DataRegion> producing = new HashMap<>();
    /** This rank's references to live values published without a copy ({@link #allocate}). */
    private final Map<String, Tensor> held = new HashMap<>();
    /** Finished data regions kept for reuse. */
    private final List<DataRegion> pool = new ArrayList<>();
    /** Data regions of other ranks mapped here, least recently used first. */
    private final LinkedHashMap<String, SharedRegion> mapped = new LinkedHashMap<>(16, 0.75f, true);
    private long nextDataSequence;
    private boolean closed;

    /** The regions of rank {@code rank} of the store whose control region is {@code controlName}. */
    FileStoreDataRegions(String controlName, int rank) {
        this.controlName = controlName;
        this.rank = rank;
    }

    /** The name of data region {@code sequence} of {@code producerRank}. */
    String dataRegionName(int producerRank, long sequence) {
        return controlName + "-r" + producerRank + "-" + sequence;
    }

    /** The region {@link #allocate} made that holds {@code value}'s bytes contiguously, or null. */
    SharedRegion allocatedRegionOf(Tensor value, long nbytes) {
        if (nbytes == 0 || !value.is_contiguous()) {
            return null;
        }
        SharedRegion region = ShmTensors.regionContaining(TorchTensors.address(value), nbytes);
        return region != null && region.name().startsWith(controlName + "-a") ? region : null;
    }

    /** A finished region of about the right size from the pool, or a new one. */
    synchronized DataRegion dataRegionFor(long nbytes) {
        DataRegion best = null;
        for (DataRegion d : pool) {
            long size = d.region().size();
            if (size >= nbytes && size <= Math.max(2 * nbytes, nbytes + (1L << 20)) && (best == null || size < best.region().size())) {
                best = d;
            }
        }
        if (best != null) {
            pool.remove(best);
            return best;
        }
        while (true) {
            long sequence = nextDataSequence++;
            Optional<SharedRegion> created = SharedRegion.create(dataRegionName(rank, sequence), nbytes);
            if (created.isPresent()) {
                return new DataRegion(created.get(), sequence);
            }
        }
    }

    /** Keeps a finished region for reuse, or removes it when the pool is full or the store closed. */
    synchronized void recycle(DataRegion data) {
        if (!closed && pool.size() < POOL_LIMIT) {
            pool.add(data);
            return;
        }
        data.region().unlink();
        data.region().close();
    }

    /** Notes that live key {@code key} has its bytes in {@code data}, until {@link #finished}. */
    synchronized void producing(String key, DataRegion data) {
        producing.put(key, data);
    }

    /** Keeps a reference to {@code value}, published in place under {@code key}, until {@link #finished}. */
    synchronized void hold(String key, Tensor value) {
        held.put(key, new Tensor(value));
    }

    /** Drops the reference {@link #hold} kept, when publishing failed. */
    synchronized void unhold(String key) {
        held.remove(key).close();
    }

    /** Every consumer of {@code key} finished: its data region goes back to the pool, its held reference goes. */
    synchronized void finished(String key) {
        DataRegion data = producing.remove(key);
        if (data != null) {
            recycle(data);
        }
        Tensor published = held.remove(key);
        if (published != null) {
            published.close();
        }
    }

    /** On reset: every data region goes back to the pool, every held reference goes. */
    synchronized void reset() {
        producing.values().forEach(this::recycle);
        producing.clear();
        held.values().forEach(Tensor::close);
        held.clear();
    }

    /**
     * A tensor over another rank's data region, mapping it. Pool regions are reused by their producer, so
     * their mappings are kept (a few); an allocated region lives as long as its tensor, so it is not.
     */
    synchronized Tensor viewOf(String dataName, long offset, boolean cacheable, long[] shape, ScalarType dtype) {
        if (!cacheable) {
            try (SharedRegion region = SharedRegion.open(dataName).orElseThrow(() -> new IllegalStateException("shared memory "
                + dataName + " does not exist (its producer freed the value before every consumer took it)"))) {
                return ShmTensors.view(region, offset, shape, dtype);
            }
        }
        SharedRegion region = mapped.get(dataName);
        if (region == null) {
            region = SharedRegion.open(dataName).orElseThrow(() -> new IllegalStateException("shared memory " + dataName
                + " does not exist (its producer removed it before every consumer took the value)"));
            mapped.put(dataName, region);
            if (mapped.size() > MAPPED_LIMIT) {
                Iterator<SharedRegion> eldest = mapped.values().iterator();
                SharedRegion evicted = eldest.next();
                eldest.remove();
                evicted.release();
            }
        }
        return ShmTensors.view(region, offset, shape, dtype);
    }

    /**
     * A new tensor in a region of its own, removed when the tensor and every view of it are freed. A tensor with no
     * element needs no shared memory (a region cannot be empty, and nobody writes into it): it is an ordinary one, and
     * publishing it copies its no bytes into its entry.
     */
    Tensor allocate(long[] shape, ScalarType dtype) {
        long nbytes = ShmTensors.byteSize(shape, dtype);
        if (nbytes == 0) {
            return ShmTensors.empty(shape, dtype);
        }
        SharedRegion region;
        synchronized (this) {
            while (true) {
                Optional<SharedRegion> created = SharedRegion.create(controlName + "-a" + rank + "-" + nextDataSequence++, nbytes);
                if (created.isPresent()) {
                    region = created.get();
                    break;
                }
            }
        }
        region.unlinkWhenUnmapped();
        try (region) {
            return ShmTensors.view(region, 0, shape, dtype);
        }
    }

    /**
     * On close: removes the pooled regions, closes the produced ones (and removes them too if this rank is the
     * {@code last} one: nobody can read them any more), drops held references and mappings. A region recycled
     * afterwards is removed at once.
     */
    synchronized void close(boolean last) {
        closed = true;
        for (DataRegion d : pool) {
            d.region().unlink();
            d.region().close();
        }
        pool.clear();
        for (DataRegion d : producing.values()) {
            if (last) {
                d.region().unlink();
            }
            d.region().close();
        }
        producing.clear();
        held.values().forEach(Tensor::close);
        held.clear();
        mapped.values().forEach(SharedRegion::release);
        mapped.clear();
    }
}
