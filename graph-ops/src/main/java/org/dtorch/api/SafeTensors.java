package org.dtorch.api;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.function.Consumer;
import java.util.function.Function;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.core.communication.promise.TensorFuture;
import org.dtorch.core.device.Device;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.distributed.ShardLayout;
import org.dtorch.core.distributed.Sharding;
import org.dtorch.core.safetensors.MappedShards;
import org.dtorch.core.safetensors.SafeTensorsCheckpoint;
import org.dtorch.core.safetensors.SafeTensorsDtype;
import org.dtorch.core.safetensors.SafeTensorsException;
import org.dtorch.core.safetensors.SafeTensorsHeader;
import org.dtorch.core.safetensors.SafeTensorsWriter;
import org.dtorch.core.safetensors.TensorEntry;
import org.dtorch.core.tensor.TorchTensors;
import org.dtorch.ops.SafeTensorsLoadSpec;
import org.dtorch.ops.SafeTensorsSaveSpec;

/**
 * State dicts in safetensors files (docs/safetensors.md).
 *
 * <p>{@link #load} reads tensors onto meshes with the placements asked for: the controller reads and validates the
 * headers, then issues one {@code load_safetensors} operator per tensor ({@link SafeTensorsLoadSpec}), and each device's
 * worker (a thread, or its worker process) maps and copies only the bytes of its own shard; the data never passes
 * through the controller. Everything is validated before the first operator is issued: the files, the names (missing
 * and unexpected ones, refused in strict mode, reported otherwise), the placements (no partial one) and the shapes the
 * caller expects. The tensors return at once, as any operator's outputs; a read that fails on a worker (the file
 * changed underneath) fails them as any failed operator does.
 *
 * <p>{@link #save} lays the file out and writes its header, then each device writes its own shard into its place
 * ({@link SafeTensorsSaveSpec}; of replicas, one writes), so no tensor is gathered; partial tensors are reduced to
 * replicas first. It blocks until every byte is written, then syncs the file to disk and moves it into place, so the
 * file is never seen half written. {@link #saveSharded} writes several files and their index.
 *
 * <p>Not thread-safe: called from the runtime's client thread, like every operator.
 */
public final class SafeTensors {

    private SafeTensors() {
    }

    /**
     * Where one tensor goes: a mesh, its placements, and optionally the shape the caller expects (a model's parameter),
     * which a file's tensor must have.
     *
     * <p>Thread-safe: immutable.
     *
     * @param mesh       the mesh
     * @param placements one per mesh dimension ({@code S(d)} or {@code R})
     * @param shape      the expected shape, or null for whatever the file holds
     */
    public record Layout(DeviceMesh mesh, List<Placement> placements, long[] shape) {
        /** Validates and copies. */
        public Layout {
            Objects.requireNonNull(mesh, "mesh");
            placements = List.copyOf(placements);
            shape = shape == null ? null : shape.clone();
        }

        /** {@code placements} on {@code mesh}, any shape. */
        public static Layout of(DeviceMesh mesh, Placement... placements) {
            return new Layout(mesh, DTorch.placementsFor("Layout", mesh, placements), null);
        }

        /** This layout, expecting {@code expected}. */
        public Layout withShape(long... expected) {
            return new Layout(mesh, placements, Objects.requireNonNull(expected, "shape"));
        }

        @Override
        public long[] shape() {
            return shape == null ? null : shape.clone();
        }
    }

    /**
     * What a load gave: the tensors, and the names that did not match (empty in strict mode, which refuses them).
     *
     * <p>Not thread-safe: the tensors are the client thread's.
     *
     * @param tensors    the loaded tensors by name, in file order
     * @param missing    names the caller expected that no file holds
     * @param unexpected names the files hold that the caller did not ask for (not loaded)
     */
    public record Loaded(Map<String, DTensor> tensors, List<String> missing, List<String> unexpected) implements AutoCloseable {
        /** Copies. */
        public Loaded {
            tensors = Collections.unmodifiableMap(new LinkedHashMap<>(tensors));
            missing = List.copyOf(missing);
            unexpected = List.copyOf(unexpected);
        }

        /** Closes every tensor. */
        @Override
        public void close() {
            tensors.values().forEach(DTensor::close);
        }
    }

    // ---- loading -------------------------------------------------------------------------------------------

    /** {@link #load(DTorch, List, Map, boolean)} of one file or index. */
    public static Map<String, DTensor> load(DTorch dt, Path file, Map<String, Layout> layouts, boolean strict) {
        return load(dt, List.of(Objects.requireNonNull(file, "load: file is null")), layouts, strict);
    }

    /**
     * The tensors {@code layouts} names, read from {@code files} (safetensors files and index files) with their layouts.
     * In strict mode a name missing from the files or a tensor of the files not in {@code layouts} is refused before
     * anything is read; otherwise they are skipped (see {@link #loadWithReport} to learn which).
     *
     * @throws SafeTensorsException     for a bad file, a name mismatch in strict mode, a shape other than the layout's, or
     *                                  a partial placement (naming the file and the tensor)
     * @throws IllegalArgumentException for a layout that does not fit the tensor (a shard dimension out of range)
     */
    public static Map<String, DTensor> load(DTorch dt, List<Path> files, Map<String, Layout> layouts, boolean strict) {
        return loadWithReport(dt, files, layouts, strict).tensors();
    }

    /** {@link #load(DTorch, List, Map, boolean)}, with the names that did not match. */
    public static Loaded loadWithReport(DTorch dt, List<Path> files, Map<String, Layout> layouts, boolean strict) {
        Objects.requireNonNull(layouts, "load: layouts is null");
        return loadWithReport(dt, files, layouts::get, layouts.keySet(), strict);
    }

    /**
     * Loads with a plan: {@code plan} gives each tensor name of the files its layout, or null to leave the tensor out
     * (reported as unexpected; refused in strict mode). {@code expected}, if not null, names the tensors that must be
     * there (the rest are reported as missing; refused in strict mode).
     */
    public static Loaded loadWithReport(DTorch dt, List<Path> files, Function<String, Layout> plan, Collection<String> expected,
                                        boolean strict) {
        Objects.requireNonNull(dt, "load: runtime is null");
        Objects.requireNonNull(plan, "load: plan is null");
        SafeTensorsCheckpoint checkpoint = SafeTensorsCheckpoint.open(files);
        Path first = checkpoint.files().getFirst().file();
        Map<String, Layout> chosen = new LinkedHashMap<>();
        List<String> unexpected = new ArrayList<>();
        for (String name : checkpoint.names()) {
            Layout layout = plan.apply(name);
            if (layout == null) {
                unexpected.add(name);
            } else {
                chosen.put(name, layout);
            }
        }
        List<String> missing = new ArrayList<>();
        if (expected != null) {
            for (String name : expected) {
                if (checkpoint.entry(name) == null) {
                    missing.add(name);
                }
            }
        }
        if (strict && (!missing.isEmpty() || !unexpected.isEmpty())) {
            int others = checkpoint.files().size() - 1;
            throw new SafeTensorsException(first, (others == 0 ? "" : "(and " + others + " more file" + (others == 1 ? "" : "s") + ") ")
                + "the state dict does not match (strict): " + (missing.isEmpty() ? "" : "missing " + list(missing))
                    + (!missing.isEmpty() && !unexpected.isEmpty() ? "; " : "") + (unexpected.isEmpty() ? "" : "unexpected " + list(unexpected)));
        }
        List<SafeTensorsLoadSpec> specs = new ArrayList<>();
        for (Map.Entry<String, Layout> e : chosen.entrySet()) {
            specs.add(spec(dt, checkpoint.headerOf(e.getKey()), e.getKey(), e.getValue()));
        }
        Map<String, DTensor> loaded = new LinkedHashMap<>();
        try {
            int i = 0;
            for (String name : chosen.keySet()) {
                loaded.put(name, dt.apply(specs.get(i++)));
            }
        } catch (RuntimeException e) {
            loaded.values().forEach(DTensor::close);
            throw e;
        }
        return new Loaded(loaded, missing, unexpected);
    }

    /** The operator that loads {@code name} with {@code layout}, every check done. */
    private static SafeTensorsLoadSpec spec(DTorch dt, SafeTensorsHeader header, String name, Layout layout) {
        TensorEntry entry = header.tensor(name);
        DeviceMesh mesh = dt.checkKind("load", layout.mesh());
        if (layout.placements().size() != mesh.ndim()) {
            throw new SafeTensorsException(header.file(), name, layout.placements().size() + " placements for a mesh of " + mesh.ndim()
                + " dimensions");
        }
        for (int m = 0; m < layout.placements().size(); m++) {
            if (layout.placements().get(m).isPartial()) {
                throw new SafeTensorsException(header.file(), name, "placement " + layout.placements().get(m) + " on mesh dimension " + m
                    + " is not loadable: a file holds one value of each tensor (load it as Shard or Replicate)");
            }
        }
        long[] expected = layout.shape();
        if (expected != null && !Arrays.equals(expected, entry.shape())) {
            throw new SafeTensorsException(header.file(), name, "has shape " + Arrays.toString(entry.shape()) + " in the file, but the target's is "
                + Arrays.toString(expected));
        }
        Sharding sharding = new Sharding(mesh, layout.placements());
        String problem = ShardLayout.problem(entry.shape(), sharding);
        if (problem != null) {
            throw new SafeTensorsException(header.file(), name, problem);
        }
        return new SafeTensorsLoadSpec(header.file(), header.dataStart(), entry, sharding);
    }

    private static String list(List<String> names) {
        int shown = Math.min(names.size(), 10);
        String head = String.join(", ", names.subList(0, shown));
        return "[" + head + (names.size() > shown ? ", ... (" + names.size() + " in all)" : "") + "]";
    }

    /**
     * Every tensor of {@code files} as a plain host tensor, read by the calling thread (one device: no runtime needed).
     * The caller owns the tensors.
     */
    public static Map<String, Tensor> loadToHost(List<Path> files) {
        SafeTensorsCheckpoint checkpoint = SafeTensorsCheckpoint.open(files);
        Map<String, Tensor> out = new LinkedHashMap<>();
        try {
            for (String name : checkpoint.names()) {
                out.put(name, MappedShards.readWhole(checkpoint.headerOf(name), name));
            }
        } catch (RuntimeException e) {
            out.values().forEach(Tensor::close);
            throw e;
        }
        return out;
    }

    /**
     * Writes plain tensors (a CUDA one is copied to the host first) and {@code metadata} to {@code file} from the calling
     * thread: one device, no runtime needed. The file appears complete or not at all.
     */
    public static void saveFromHost(Path file, Map<String, Tensor> tensors, Map<String, String> metadata) {
        Objects.requireNonNull(file, "save: file is null");
        Objects.requireNonNull(tensors, "save: tensors is null");
        List<SafeTensorsWriter.Planned> planned = new ArrayList<>();
        for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
            Tensor t = Objects.requireNonNull(e.getValue(), "save: tensor '" + e.getKey() + "' is null");
            SafeTensorsDtype dtype;
            try {
                dtype = SafeTensorsDtype.of(TorchTensors.dtype(t));
            } catch (IllegalArgumentException ex) {
                throw new IllegalArgumentException("save: tensor '" + e.getKey() + "': " + ex.getMessage(), ex);
            }
            planned.add(new SafeTensorsWriter.Planned(e.getKey(), dtype, TorchTensors.shape(t)));
        }
        SafeTensorsWriter.validate(planned);
        writeAtomically(file, temporary -> {
            SafeTensorsHeader header = SafeTensorsWriter.create(temporary, planned, metadata == null ? Map.of() : metadata);
            for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
                TensorEntry entry = header.tensor(e.getKey());
                try (Tensor host = TorchTensors.to(e.getValue(), Device.cpu(0))) {
                    MappedShards.write(temporary, header.dataStart(), entry, new long[entry.shape().length], host);
                }
            }
        });
    }

    /** Runs {@code write} on a temporary file beside {@code file}, syncs it to disk and moves it over {@code file}. */
    private static void writeAtomically(Path file, Consumer<Path> write) {
        Path absolute = file.toAbsolutePath();
        Path temporary = absolute.resolveSibling("." + absolute.getFileName() + ".tmp-" + UUID.randomUUID());
        try {
            write.accept(temporary);
            try (FileChannel channel = FileChannel.open(temporary, StandardOpenOption.WRITE)) {
                channel.force(true);
            }
            Files.move(temporary, absolute, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            deleteQuietly(temporary);
            throw new UncheckedIOException(file + ": cannot save: " + e.getMessage(), e);
        } catch (RuntimeException | Error e) {
            deleteQuietly(temporary);
            throw e;
        }
    }

    // ---- saving --------------------------------------------------------------------------------------------

    /** {@link #save(DTorch, Path, Map, Map)} without metadata. */
    public static void save(DTorch dt, Path file, Map<String, DTensor> tensors) {
        save(dt, file, tensors, Map.of());
    }

    /**
     * Writes {@code tensors} (in their order) and {@code metadata} to {@code file}, each device writing its own shard,
     * and returns once the file is complete and in place (a temporary file beside it is moved over it).
     *
     * @throws IllegalArgumentException for a dtype the format has no name for here (float64, int8, ...), a reserved or
     *                                  duplicate name, or a tensor of another runtime; nothing is written then
     * @throws UncheckedIOException     if the file cannot be written
     */
    public static void save(DTorch dt, Path file, Map<String, DTensor> tensors, Map<String, String> metadata) {
        Objects.requireNonNull(dt, "save: runtime is null");
        Objects.requireNonNull(file, "save: file is null");
        Objects.requireNonNull(tensors, "save: tensors is null");
        Map<String, String> meta = metadata == null ? Map.of() : metadata;
        List<SafeTensorsWriter.Planned> planned = plan(dt, tensors);
        writeAtomically(file, temporary -> writeShards(dt, SafeTensorsWriter.create(temporary, planned, meta), tensors));
    }

    /**
     * Writes {@code tensors} into files of at most about {@code maxFileBytes} of data each (a larger tensor gets a file
     * of its own) in {@code directory}, named {@code model-00001-of-0000N.safetensors}, and their index
     * {@code model.safetensors.index.json}; every file carries {@code metadata}. Returns the index's path, which
     * {@link #load} takes.
     */
    public static Path saveSharded(DTorch dt, Path directory, Map<String, DTensor> tensors, Map<String, String> metadata, long maxFileBytes) {
        Objects.requireNonNull(directory, "saveSharded: directory is null");
        if (maxFileBytes < 1) {
            throw new IllegalArgumentException("saveSharded: maxFileBytes must be positive, got " + maxFileBytes);
        }
        plan(dt, tensors);
        List<Map<String, DTensor>> groups = new ArrayList<>();
        Map<String, DTensor> current = new LinkedHashMap<>();
        long currentBytes = 0;
        long total = 0;
        for (Map.Entry<String, DTensor> e : tensors.entrySet()) {
            long bytes = e.getValue().meta().numel() * SafeTensorsDtype.of(e.getValue().dtype()).elementSize();
            if (!current.isEmpty() && currentBytes + bytes > maxFileBytes) {
                groups.add(current);
                current = new LinkedHashMap<>();
                currentBytes = 0;
            }
            current.put(e.getKey(), e.getValue());
            currentBytes += bytes;
            total += bytes;
        }
        groups.add(current);
        try {
            Files.createDirectories(directory);
        } catch (IOException e) {
            throw new UncheckedIOException(directory + ": cannot create the directory: " + e.getMessage(), e);
        }
        Map<String, String> weightMap = new LinkedHashMap<>();
        for (int i = 0; i < groups.size(); i++) {
            String name = String.format("model-%05d-of-%05d.safetensors", i + 1, groups.size());
            save(dt, directory.resolve(name), groups.get(i), metadata);
            groups.get(i).keySet().forEach(t -> weightMap.put(t, name));
        }
        Path index = directory.resolve("model.safetensors" + SafeTensorsCheckpoint.INDEX_SUFFIX);
        SafeTensorsWriter.writeIndex(index, weightMap, total);
        return index;
    }

    /** The layout of {@code tensors}, every one checked before anything is written. */
    private static List<SafeTensorsWriter.Planned> plan(DTorch dt, Map<String, DTensor> tensors) {
        List<SafeTensorsWriter.Planned> planned = new ArrayList<>();
        for (Map.Entry<String, DTensor> e : tensors.entrySet()) {
            String name = Objects.requireNonNull(e.getKey(), "save: a tensor name is null");
            DTensor t = Objects.requireNonNull(e.getValue(), "save: tensor '" + name + "' is null");
            t.ensureOpen();
            if (t.runtime() != dt) {
                throw new IllegalArgumentException("save: tensor '" + name + "' belongs to another runtime");
            }
            SafeTensorsDtype dtype;
            try {
                dtype = SafeTensorsDtype.of(t.dtype());
            } catch (IllegalArgumentException ex) {
                throw new IllegalArgumentException("save: tensor '" + name + "': " + ex.getMessage() + "; convert it with to(dtype) first", ex);
            }
            planned.add(new SafeTensorsWriter.Planned(name, dtype, t.shape()));
        }
        SafeTensorsWriter.validate(planned);
        return planned;
    }

    /** Issues every tensor's writes, then waits for all of them and checks that each covered its bytes. */
    private static void writeShards(DTorch dt, SafeTensorsHeader header, Map<String, DTensor> tensors) {
        Map<String, TensorFuture> counts = new LinkedHashMap<>();
        for (Map.Entry<String, DTensor> e : tensors.entrySet()) {
            DTensor t = e.getValue();
            DTensor source = withoutPartial(t);
            try (DTensor written = dt.apply(new SafeTensorsSaveSpec(header.file(), header.dataStart(), header.tensor(e.getKey())), source)) {
                counts.put(e.getKey(), dt.getTensorAsync(written));
            } finally {
                if (source != t) {
                    source.close();
                }
            }
        }
        for (Map.Entry<String, TensorFuture> e : counts.entrySet()) {
            long bytes;
            try (Tensor perDevice = e.getValue().get(); Tensor sum = perDevice.sum()) {
                bytes = sum.item_long();
            }
            long expected = header.tensor(e.getKey()).nbytes();
            if (bytes != expected) {
                throw new IllegalStateException(header.file() + ": tensor '" + e.getKey() + "': the devices wrote " + bytes + " bytes of "
                    + expected);
            }
        }
    }

    /** {@code t}, or its partial mesh dimensions reduced to replicas (a new tensor the caller closes). */
    private static DTensor withoutPartial(DTensor t) {
        List<Placement> placements = new ArrayList<>(t.placements());
        boolean partial = false;
        for (int m = 0; m < placements.size(); m++) {
            if (placements.get(m).isPartial()) {
                placements.set(m, Placement.replicate());
                partial = true;
            }
        }
        return partial ? t.redistribute(t.mesh(), placements.toArray(Placement[]::new)) : t;
    }

    private static void deleteQuietly(Path path) {
        try {
            Files.deleteIfExists(path);
        } catch (IOException ignored) {
            // The save already failed with its own error; a leftover temporary file is named by its prefix.
        }
    }
}
