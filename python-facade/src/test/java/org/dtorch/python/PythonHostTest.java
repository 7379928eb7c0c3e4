package org.dtorch.python;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.polyglot.PyBridge;
import org.dtorch.polyglot.PythonHost;
import org.graalvm.polyglot.PolyglotException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The context owner's allow-list: of the JVM's objects, Python reaches the bridge's exported methods and nothing else.
 * This is not a sandbox: outside {@code --isolated} a script keeps the rights of the user who runs it (files, sockets,
 * processes, native code), as under CPython; {@link IsolatedRunTest} covers the isolated mode.
 */
@Timeout(120)
class PythonHostTest {

    @Test
    void shouldExposeOnlyTheExportedFacade() {
        try (DTorch runtime = DTorch.init(DTorchOptions.builder().devices(2).build());
             PythonHost host = PythonHost.builder().bridge(new PyBridge(runtime)).build()) {
            assertEquals(2, host.eval("import polyglot; polyglot.import_value('dtorch.bridge').deviceCount()").asInt());
            PolyglotException lookup = assertThrows(PolyglotException.class, () -> host.eval("import java; java.type('java.lang.System')"));
            assertTrue(lookup.getMessage().contains("java.lang.System") || lookup.getMessage().contains("not"), lookup.getMessage());
            // A public but unexported method of an object Python holds is not reachable.
            PolyglotException hidden = assertThrows(PolyglotException.class,
                () -> host.eval("import polyglot; polyglot.import_value('dtorch.bridge').runtime()"));
            assertTrue(hidden.getMessage().toLowerCase().contains("runtime"), hidden.getMessage());
            PolyglotException mesh = assertThrows(PolyglotException.class,
                () -> host.eval("import polyglot; polyglot.import_value('dtorch.bridge').defaultMesh().count()"));
            assertTrue(mesh.getMessage().contains("count"), mesh.getMessage());
        }
    }

    @Test
    void shouldRunTheDtorchPackageFromTheVirtualFileSystem() {
        try (DTorch runtime = DTorch.init(DTorchOptions.builder().devices(2).build());
             PythonHost host = PythonHost.builder().bridge(new PyBridge(runtime)).build()) {
            String value = host.eval("import dtorch\nstr((dtorch.arange(4, device_mesh=dtorch.DeviceMesh('cpu', [0, 1]), "
                + "placements=[dtorch.Shard(0)]) * 3).to_torch().tolist())").asString();
            assertEquals("[0, 3, 6, 9]", value);
        }
    }
}
