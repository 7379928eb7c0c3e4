package org.dtorch.core.safetensors;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The tensors of one checkpoint: one or more safetensors files, or the index of a sharded one
 * ({@code model.safetensors.index.json}: {@code {"metadata": {...}, "weight_map": {"tensor": "file", ...}}}, the files
 * beside it), every header read and validated before anything else happens. A tensor name appears in exactly one file;
 * an index must agree with the headers of the files it names (each listed tensor is in its file, each tensor of those
 * files is listed there).
 *
 * <p>Thread-safe: immutable.
 */
public final class SafeTensorsCheckpoint {
    /** The suffix that marks an index rather than a data file. */
    public static final String INDEX_SUFFIX = ".index.json";
    /** The largest index accepted: a hostile file allocates no more. */
    private static final long MAX_INDEX_BYTES = 100L << 20;

    private final Map<String, SafeTensorsHeader> byTensor;
    private final List<SafeTensorsHeader> files;

    private SafeTensorsCheckpoint(Map<String, SafeTensorsHeader> byTensor, List<SafeTensorsHeader> files) {
        this.byTensor = Collections.unmodifiableMap(byTensor);
        this.files = List.copyOf(files);
    }

    /**
     * Opens {@code paths}: safetensors files and index files (a name ending in {@value #INDEX_SUFFIX}), in order.
     *
     * @throws SafeTensorsException naming the file (and tensor) at fault
     * @throws UncheckedIOException if a file cannot be read
     */
    public static SafeTensorsCheckpoint open(List<Path> paths) {
        Objects.requireNonNull(paths, "paths");
        if (paths.isEmpty()) {
            throw new IllegalArgumentException("no safetensors file given");
        }
        Map<String, SafeTensorsHeader> byTensor = new LinkedHashMap<>();
        List<SafeTensorsHeader> files = new ArrayList<>();
        for (Path path : paths) {
            Objects.requireNonNull(path, "a path is null");
            if (path.getFileName() != null && path.getFileName().toString().endsWith(INDEX_SUFFIX)) {
                for (SafeTensorsHeader header : index(path)) {
                    add(header, byTensor, files);
                }
            } else {
                add(SafeTensorsHeader.read(path), byTensor, files);
            }
        }
        return new SafeTensorsCheckpoint(byTensor, files);
    }

    /** Opens one file or index. */
    public static SafeTensorsCheckpoint open(Path path) {
        return open(List.of(path));
    }

    private static void add(SafeTensorsHeader header, Map<String, SafeTensorsHeader> byTensor, List<SafeTensorsHeader> files) {
        for (SafeTensorsHeader seen : files) {
            if (seen.file().toAbsolutePath().normalize().equals(header.file().toAbsolutePath().normalize())) {
                throw new SafeTensorsException(header.file(), "is given twice");
            }
        }
        files.add(header);
        for (String name : header.tensors().keySet()) {
            SafeTensorsHeader other = byTensor.putIfAbsent(name, header);
            if (other != null) {
                throw new SafeTensorsException(header.file(), name, "is also in " + other.file() + "; a checkpoint holds each tensor once");
            }
        }
    }

    /** The headers of the files {@code index} names, checked against its weight map. */
    private static List<SafeTensorsHeader> index(Path index) {
        Object root;
        try {
            if (Files.size(index) > MAX_INDEX_BYTES) {
                throw new SafeTensorsException(index, "index is larger than " + MAX_INDEX_BYTES + " bytes");
            }
            root = StrictJson.parse(Files.readString(index, StandardCharsets.UTF_8));
        } catch (NoSuchFileException e) {
            throw new SafeTensorsException(index, "no such file");
        } catch (IOException e) {
            throw new UncheckedIOException(index + ": cannot read the index: " + e.getMessage(), e);
        } catch (SafeTensorsException e) {
            throw e;
        } catch (IllegalArgumentException e) {
            throw new SafeTensorsException(index, "index is not JSON: " + e.getMessage());
        }
        if (!(root instanceof Map<?, ?> members) || !(members.get("weight_map") instanceof Map<?, ?> weightMap)) {
            throw new SafeTensorsException(index, "index has no \"weight_map\" object");
        }
        Map<String, List<String>> byFile = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : weightMap.entrySet()) {
            if (!(e.getValue() instanceof String fileName) || fileName.isEmpty()) {
                throw new SafeTensorsException(index, (String) e.getKey(), "weight_map value is not a file name: " + e.getValue());
            }
            byFile.computeIfAbsent(fileName, f -> new ArrayList<>()).add((String) e.getKey());
        }
        Path directory = index.toAbsolutePath().getParent();
        List<SafeTensorsHeader> headers = new ArrayList<>();
        for (Map.Entry<String, List<String>> e : byFile.entrySet()) {
            Path file = directory.resolve(e.getKey()).normalize();
            if (!file.startsWith(directory)) {
                throw new SafeTensorsException(index, "weight_map names " + e.getKey() + ", outside the index's directory");
            }
            SafeTensorsHeader header = SafeTensorsHeader.read(file);
            for (String name : e.getValue()) {
                if (header.tensor(name) == null) {
                    throw new SafeTensorsException(index, name, "weight_map puts it in " + file + ", whose header does not have it");
                }
            }
            for (String name : header.tensors().keySet()) {
                if (!e.getValue().contains(name) && !weightMap.containsKey(name)) {
                    throw new SafeTensorsException(file, name, "is not in the weight_map of " + index);
                }
            }
            headers.add(header);
        }
        return headers;
    }

    /** The tensor names, in file order then header order. */
    public List<String> names() {
        return List.copyOf(byTensor.keySet());
    }

    /** The header of the file that holds {@code name}, or null. */
    public SafeTensorsHeader headerOf(String name) {
        return byTensor.get(name);
    }

    /** The entry of {@code name}, or null. */
    public TensorEntry entry(String name) {
        SafeTensorsHeader header = byTensor.get(name);
        return header == null ? null : header.tensor(name);
    }

    /** The files' headers, in order. */
    public List<SafeTensorsHeader> files() {
        return files;
    }

    /** The metadata of every file, merged in file order (a later file's value of a key wins). */
    public Map<String, String> metadata() {
        Map<String, String> merged = new LinkedHashMap<>();
        files.forEach(h -> merged.putAll(h.metadata()));
        return merged;
    }

    @Override
    public String toString() {
        return "SafeTensorsCheckpoint{" + files.size() + " files, " + byTensor.size() + " tensors}";
    }
}
