package org.dtorch.core.communication.group;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Device;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The dtype and shape of every rank's tensor, gathered before a collective whose sizes the ranks do not know of each
 * other ({@link ThreadGroup#allGatherCat}). Each rank describes its tensor in one int64 row of fixed length, so that
 * the rows can be gathered whatever the ranks hold:
 *
 * <pre>
 *   index:  0         1      2 .. 2+ndim-1        .. 2+MAX_DIMS-1
 *          +---------+------+--------------------+--------------+
 *          | dtype   | ndim | size of each dim   | zeros        |
 *          +---------+------+--------------------+--------------+
 * </pre>
 *
 * <p>Thread-safe: stateless.
 */
final class PeerShapes {
    /** The most dims a described tensor may have. */
    static final int MAX_DIMS = 25;
    private static final int ROW = 2 + MAX_DIMS;

    private PeerShapes() {
    }

    /** {@code local}'s row, on its device (c10d gathers on the group's device kind). */
    static Tensor describe(String where, Tensor local) {
        long[] shape = TorchTensors.shape(local);
        if (shape.length > MAX_DIMS) {
            throw new IllegalArgumentException(where + ": input " + TorchTensors.describe(local) + " has more than " + MAX_DIMS + " dims");
        }
        long[] row = new long[ROW];
        row[0] = TorchTensors.dtype(local).value;
        row[1] = shape.length;
        System.arraycopy(shape, 0, row, 2, shape.length);
        Tensor host = torch.empty(new long[] {ROW}, TorchTensors.options(ScalarType.Long, Device.cpu(0)), new MemoryFormatOptional());
        MemorySegment.ofAddress(TorchTensors.address(host)).reinterpret(ROW * Long.BYTES)
            .copyFrom(MemorySegment.ofArray(row));
        if (!local.is_cuda()) {
            return host;
        }
        try (host) {
            return TorchTensors.to(host, TorchTensors.device(local));
        }
    }

    /**
     * Every rank's size on {@code dim}, in rank order, from the gathered rows {@code [world, ROW]} (closed here); fails
     * alike on every rank when any rank's dtype or other dims differ from {@code local}'s.
     */
    static long[] sizesOnDim(String where, Tensor local, int dim, Tensor gathered) {
        long[] rows;
        try (gathered; Tensor host = gathered.cpu(); Tensor dense = host.contiguous()) {
            rows = MemorySegment.ofAddress(TorchTensors.address(dense)).reinterpret(dense.numel() * Long.BYTES)
                .toArray(ValueLayout.JAVA_LONG);
        }
        int world = rows.length / ROW;
        long[] sizes = new long[world];
        long[] first = Arrays.copyOfRange(rows, 0, ROW);
        for (int r = 0; r < world; r++) {
            long[] row = Arrays.copyOfRange(rows, r * ROW, (r + 1) * ROW);
            sizes[r] = row[2 + dim];
            row[2 + dim] = first[2 + dim];
            if (!Arrays.equals(row, first)) {
                throw new IllegalArgumentException(where + ": ranks disagree on everything but dim " + dim + ": rank 0 has "
                    + describe(rows, 0) + ", rank " + r + " has " + describe(rows, r) + " (this rank: "
                    + TorchTensors.describe(local) + ")");
            }
        }
        return sizes;
    }

    private static String describe(long[] rows, int rank) {
        int at = rank * ROW;
        ScalarType type = TorchTensors.ofCode(rows[at]);
        String dtype = type != null ? TorchTensors.dtypeName(type) : "dtype " + rows[at];
        return dtype + Arrays.toString(Arrays.copyOfRange(rows, at + 2, at + 2 + (int) rows[at + 1]));
    }
}
