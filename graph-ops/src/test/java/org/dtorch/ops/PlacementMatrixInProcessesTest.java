package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.PlacementMatrix.Op;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * {@link PlacementMatrixTest}'s programs with every device a worker process: one operator of each family on every pair
 * of input placements over four devices in a row, with implicit redistribution and in the strict mode. The implicit
 * moves, the operators and their refusals are the controller's; the kernels, collectives and halo exchanges run in the
 * workers. Tagged {@code slow}: every build runs the matrix in threads, and the operators' calls and collectives in
 * worker processes ({@link GenericOpsInProcessesTest}, {@link OperatorsInProcessesTest}).
 */
@Tag("multiprocess")
@Tag("slow")
@Timeout(600)
class PlacementMatrixInProcessesTest {
    private static final int[] LINE = {4};
    private static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).perDevicePerProcess(true).build());
    }

    @AfterAll
    static void stop() {
        dt.close();
    }

    @Test
    void shouldTakeOneOperatorOfEveryFamily() {
        Set<String> all = new TreeSet<>();
        PlacementMatrix.ops().forEach(o -> all.add(o.family()));
        Set<String> taken = new TreeSet<>();
        PlacementMatrix.onePerFamily().forEach(o -> taken.add(o.family()));
        assertEquals(all, taken);
    }

    @TestFactory
    List<DynamicTest> everyPairOfPlacementsOnFourWorkerProcessesGivesTorchsValue() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Op op : PlacementMatrix.onePerFamily()) {
            tests.add(DynamicTest.dynamicTest(op.toString(), () -> {
                List<List<List<Placement>>> cases = PlacementMatrix.withMustFit(op, PlacementMatrix.pairs(op, LINE));
                PlacementMatrix.Outcome outcome = PlacementMatrix.run(dt, op, LINE, cases);
                assertFalse(outcome.failed(), () -> outcome.report(op));
            }));
        }
        return tests;
    }

    /**
     * {@link ShardedDimensionArgumentsTest}'s cases that take or give tensors with no elements (a narrow or slice to
     * nothing, an empty piece of a split, a concatenation with an empty tensor), on every placement over four worker
     * processes: tensors with no elements cross the File store and promises as any others.
     */
    @Test
    void shouldRunOperatorsOnTensorsWithNoElementsInWorkerProcesses() {
        List<String> reports = new ArrayList<>();
        for (Op op : ShardedDimensionArgumentsTest.all().stream().filter(ShardedDimensionArgumentsTest::touchesEmptyTensors).toList()) {
            PlacementMatrix.Outcome outcome = PlacementMatrix.run(dt, op, LINE, PlacementMatrix.every(op, LINE, PlacementMatrix.Shards.NON_EMPTY));
            if (outcome.failed()) {
                reports.add(outcome.report(op));
            }
        }
        assertEquals(List.of(), reports);
    }
}
