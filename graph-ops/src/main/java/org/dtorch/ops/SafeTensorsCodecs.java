package org.dtorch.ops;

import java.nio.file.Path;
import java.util.List;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.dtorch.core.graph.OpSpec;
import org.dtorch.core.runtime.process.OpSpecCodec;
import org.dtorch.core.runtime.process.OpSpecCodecProvider;
import org.dtorch.core.runtime.process.ProtocolException;
import org.dtorch.core.runtime.process.SpecReader;
import org.dtorch.core.runtime.process.SpecWriter;
import org.dtorch.core.runtime.process.WireReader;
import org.dtorch.core.runtime.process.WireWriter;
import org.dtorch.core.safetensors.SafeTensorsDtype;
import org.dtorch.core.safetensors.TensorEntry;

/**
 * The codecs of {@link SafeTensorsLoadSpec} and {@link SafeTensorsSaveSpec} for per-device-process mode: the file's
 * path, where its data starts and the tensor's header entry travel, never its bytes; each worker maps its own shard.
 * Registered in {@code META-INF/services/org.dtorch.core.runtime.process.OpSpecCodecProvider}.
 *
 * <p>Thread-safe: stateless.
 */
public final class SafeTensorsCodecs implements OpSpecCodecProvider {

    private record Codec<S extends OpSpec>(Class<S> specClass, String tag, BiConsumer<S, SpecWriter> writer,
                                           Function<SpecReader, S> reader) implements OpSpecCodec<S> {
        @Override
        public void write(S spec, SpecWriter out) {
            writer.accept(spec, out);
        }

        @Override
        public S read(SpecReader in) {
            return reader.apply(in);
        }
    }

    private static void writeEntry(String file, long dataStart, TensorEntry entry, WireWriter out) {
        out.putString(file).putLong(dataStart).putString(entry.name()).putByte(entry.dtype().ordinal()).putLongs(entry.shape())
            .putLong(entry.begin()).putLong(entry.end());
    }

    /** The file, data start and entry a worker received, checked as the controller checked them. */
    private record Located(Path file, long dataStart, TensorEntry entry) {
    }

    private static Located readEntry(WireReader in) {
        Path file = Path.of(in.getString("safetensors file"));
        long dataStart = in.getLong("safetensors data start");
        String name = in.getString("safetensors tensor");
        SafeTensorsDtype dtype = SafeTensorsDtype.values()[in.getByteIn("safetensors dtype", 0, SafeTensorsDtype.values().length - 1)];
        long[] shape = in.getShape("safetensors shape");
        long begin = in.getLong("safetensors begin");
        long end = in.getLong("safetensors end");
        long numel = TensorEntry.numel(shape);
        if (dataStart < 8 || begin < 0 || numel < 0 || numel > Long.MAX_VALUE / dtype.elementSize() || end - begin != numel * dtype.elementSize()) {
            throw new ProtocolException("safetensors entry of '" + name + "' is inconsistent: data start " + dataStart + ", bytes ["
                + begin + ", " + end + ") for " + numel + " elements of " + dtype);
        }
        return new Located(file, dataStart, new TensorEntry(name, dtype, shape, begin, end));
    }

    @Override
    public List<OpSpecCodec<?>> codecs() {
        return List.of(
            new Codec<>(SafeTensorsLoadSpec.class, "ops.load_safetensors", (s, out) -> {
                writeEntry(s.file(), s.dataStart(), s.entry(), out.wire());
                out.sharding(s.sharding());
            }, in -> {
                Located at = readEntry(in.wire());
                return new SafeTensorsLoadSpec(at.file(), at.dataStart(), at.entry(), in.sharding("load_safetensors sharding"));
            }),
            new Codec<>(SafeTensorsSaveSpec.class, "ops.save_safetensors", (s, out) -> writeEntry(s.file(), s.dataStart(), s.entry(), out.wire()),
                in -> {
                    Located at = readEntry(in.wire());
                    return new SafeTensorsSaveSpec(at.file(), at.dataStart(), at.entry());
                }));
    }
}
