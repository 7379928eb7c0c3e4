package org.dtorch.python;

import java.io.IOException;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/** The Python scripts at odd positions in name order ({@link PythonScriptsTest} runs the others). */
class PythonScriptsOtherHalfTest {

    @TestFactory
    @Timeout(600)
    Stream<DynamicTest> pythonScripts() throws IOException {
        return PythonScriptsTest.half(1);
    }
}
