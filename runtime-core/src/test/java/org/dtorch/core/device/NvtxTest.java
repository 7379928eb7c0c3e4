package org.dtorch.core.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** NVTX through the FFM API: counting without a library, and real calls into one built from CUDA's NVTX 3 headers. */
@Timeout(60)
class NvtxTest {
    /** Where this machine's CUDA headers are, if it has them (the build itself needs none). */
    private static final Path NVTX_HEADERS = Path.of(System.getenv().getOrDefault("CUDA_HOME", "/usr/local/cuda-13.0"), "include");

    @TempDir
    Path dir;

    @Test
    void shouldCountRangesAndSayWhyWithoutALibrary() {
        Nvtx nvtx = Nvtx.load("libdtorch-no-such-nvtx.so");
        assertEquals(-1, nvtx.push("matmul"));
        assertEquals(-1, nvtx.pop());
        assertEquals(1, nvtx.pushes.sum());
        assertEquals(1, nvtx.pops.sum());
        assertEquals(0, nvtx.nativeCalls.sum());
        assertNotNull(nvtx.unavailable);
        assertTrue(nvtx.unavailable.contains("libdtorch-no-such-nvtx.so") && nvtx.unavailable.contains(Nvtx.LIBRARY_PROPERTY),
            nvtx.unavailable);
    }

    /**
     * Builds the library that docs/observability.md describes (NVTX_EXPORT_API over the NVTX 3 headers) where gcc and
     * the headers are, and calls it: with no tool attached, NVTX answers NVTX_NO_PUSH_POP_TRACKING (-2).
     */
    @Test
    void shouldCallALibraryBuiltFromTheNvtx3Headers() throws Exception {
        assumeTrue(Files.exists(NVTX_HEADERS.resolve("nvtx3/nvToolsExt.h")), "no NVTX 3 headers under " + NVTX_HEADERS);
        Path source = Files.writeString(dir.resolve("nvtx.c"), "#define NVTX_EXPORT_API\n#include <nvtx3/nvToolsExt.h>\n");
        Path library = dir.resolve("libnvToolsExt.so.1");
        Process gcc;
        try {
            gcc = new ProcessBuilder("gcc", "-shared", "-fPIC", "-I" + NVTX_HEADERS, source.toString(), "-o", library.toString(), "-ldl")
                .redirectErrorStream(true).start();
        } catch (java.io.IOException e) {
            assumeTrue(false, "no gcc: " + e.getMessage());
            return;
        }
        String output = new String(gcc.getInputStream().readAllBytes());
        assertTrue(gcc.waitFor(50, TimeUnit.SECONDS) && gcc.exitValue() == 0, "gcc: " + output);

        Nvtx nvtx = Nvtx.load(library.toString());
        assertNull(nvtx.unavailable);
        for (int i = 0; i < 3; i++) {
            assertEquals(-2, nvtx.push("allReduce(sum)"), "the cached name");
            assertEquals(-2, nvtx.pop());
        }
        for (int i = 0; i < Nvtx.NAME_CACHE_LIMIT + 2; i++) {
            nvtx.push("op" + i); // past the cache's limit the name is encoded per call
            nvtx.pop();
        }
        long ranges = 3 + Nvtx.NAME_CACHE_LIMIT + 2;
        assertEquals(ranges, nvtx.pushes.sum());
        assertEquals(ranges, nvtx.pops.sum());
        assertEquals(2 * ranges, nvtx.nativeCalls.sum());
    }
}
