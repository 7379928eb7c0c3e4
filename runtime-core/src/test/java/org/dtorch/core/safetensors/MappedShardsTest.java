package org.dtorch.core.safetensors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.device.Cuda;
import org.dtorch.core.device.Device;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.memory.ProcessMemory;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Reads and writes of parts of a tensor against libtorch's narrow of the whole: random shapes and parts, windows from
 * a few bytes (a run split over several mappings) to whole tensors; every mapping is released.
 */
class MappedShardsTest {
    @TempDir
    Path dir;

    @BeforeAll
    static void loadNatives() {
        Cuda.loadNatives();
    }

    private static Tensor arange(long[] shape) {
        try (TensorOptions options = TorchTensors.options(ScalarType.Long, Device.cpu(0));
             Tensor flat = torch.arange(new org.bytedeco.pytorch.Scalar(TensorEntry.numel(shape)), options)) {
            return flat.reshape(shape).to(ScalarType.Int);
        }
    }

    @Test
    void shouldReadAndWriteRandomPartsAsNarrowDoes() throws IOException {
        SplittableRandom random = new SplittableRandom(7);
        long mappedBefore = ProcessMemory.FILE_MAPPINGS.live();
        for (int trial = 0; trial < 60; trial++) {
            int ndim = random.nextInt(0, 4);
            long[] shape = new long[ndim];
            long[] local = new long[ndim];
            long[] offsets = new long[ndim];
            for (int d = 0; d < ndim; d++) {
                shape[d] = random.nextInt(0, 6);
                local[d] = shape[d] == 0 ? 0 : random.nextInt(0, (int) shape[d] + 1);
                offsets[d] = random.nextInt(0, (int) (shape[d] - local[d]) + 1);
            }
            long window = List.of(3L, 8L, 20L, MappedShards.WINDOW_BYTES).get(random.nextInt(4));
            Path file = dir.resolve("t" + trial + ".safetensors");
            SafeTensorsHeader header = SafeTensorsWriter.create(file, List.of(
                new SafeTensorsWriter.Planned("pad", SafeTensorsDtype.U8, new long[] {3}),
                new SafeTensorsWriter.Planned("x", SafeTensorsDtype.I32, shape)), Map.of());
            TensorEntry entry = header.tensor("x");
            try (Tensor whole = arange(shape)) {
                assertEquals(entry.nbytes(), MappedShards.write(file, header.dataStart(), entry, new long[ndim], whole, window));
                try (Tensor part = MappedShards.read(file, header.dataStart(), entry, local, offsets, window);
                     Tensor expected = ShardLayout.narrow(whole, offsets, local)) {
                    assertTrue(part.equal(expected), "part " + java.util.Arrays.toString(local) + " at " + java.util.Arrays.toString(offsets)
                        + " of " + java.util.Arrays.toString(shape) + ", window " + window);
                    // The part written alone into a zeroed file lands where narrow says.
                    SafeTensorsHeader fresh = SafeTensorsWriter.create(file, List.of(new SafeTensorsWriter.Planned("x", SafeTensorsDtype.I32, shape)),
                        Map.of());
                    MappedShards.write(file, fresh.dataStart(), fresh.tensor("x"), offsets, part, window);
                    try (Tensor back = MappedShards.readWhole(SafeTensorsHeader.read(file), "x");
                         Tensor zeros = torch.zeros_like(whole);
                         Tensor slot = ShardLayout.narrow(zeros, offsets, local)) {
                        slot.copy_(part);
                        assertTrue(back.equal(zeros));
                    }
                }
            }
        }
        assertEquals(mappedBefore, ProcessMemory.FILE_MAPPINGS.live(), "every mapping is released");
    }

    @Test
    void shouldMapOnlyTheShardSpanOfARowShard() {
        long[] shape = {8, 4};
        Path file = dir.resolve("rows.safetensors");
        SafeTensorsHeader header = SafeTensorsWriter.create(file, List.of(new SafeTensorsWriter.Planned("x", SafeTensorsDtype.I32, shape)), Map.of());
        assertEquals(List.of(16L * 2, 16L * 5), java.util.Arrays.stream(MappedShards.span(shape, new long[] {3, 4}, new long[] {2, 0}, 4)).boxed().toList());
        ProcessMemory.FILE_MAPPINGS.resetPeak();
        long before = ProcessMemory.FILE_MAPPINGS.peak();
        try (Tensor part = MappedShards.read(file, header.dataStart(), header.tensor("x"), new long[] {3, 4}, new long[] {2, 0})) {
            assertEquals(before + 48, ProcessMemory.FILE_MAPPINGS.peak(), "three rows of 16 bytes mapped, no more");
        }
    }

    @Test
    void shouldRefuseAFileTruncatedAfterItsHeaderWasRead() throws IOException {
        Path file = dir.resolve("cut.safetensors");
        SafeTensorsHeader header = SafeTensorsWriter.create(file, List.of(new SafeTensorsWriter.Planned("x", SafeTensorsDtype.F32, new long[] {64})),
            Map.of());
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
            channel.truncate(header.dataStart() + 10);
        }
        SafeTensorsException e = assertThrows(SafeTensorsException.class,
            () -> MappedShards.read(file, header.dataStart(), header.tensor("x"), new long[] {64}, new long[] {0}));
        assertTrue(e.getMessage().contains("tensor 'x'") && e.getMessage().contains("truncated after its header was read"), e.getMessage());
    }
}
