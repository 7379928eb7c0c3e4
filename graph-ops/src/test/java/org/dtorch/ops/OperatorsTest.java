package org.dtorch.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRef;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.tensor.TorchTensors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every operator against torch on the full tensors, on 1-, 2- and 4-device meshes, with each combination
 * of placements its sharding rule accepts (partial inputs are made by redistributing replicated ones).
 */
class OperatorsTest {
    private static final Placement R = Placement.replicate();
    private static final Placement S0 = Placement.shard(0);
    private static final Placement S1 = Placement.shard(1);
    private static final Placement S2 = Placement.shard(2);
    private static final Placement P = Placement.partial();
    static DTorch dt;

    @BeforeAll
    static void start() {
        dt = DTorch.init(DTorchOptions.builder().devices(4).build());
    }

    @AfterAll
    static void stop() {
        SharedWorkerProcesses.closeUnlessShared(dt);
    }

    /** One operator under test: input shapes, accepted placement combinations, the operator and torch's answer. */
    record Case(String name, List<long[]> shapes, ScalarType dtype, List<List<Placement>> accepted,
                Function<List<DTensor>, DTensor> op, Function<List<Tensor>, Tensor> torchOp) {
    }

    private static List<Placement> p(Placement... ps) {
        return List.of(ps);
    }

    private static long[] s(long... dims) {
        return dims;
    }

    static List<Case> cases() {
        List<Case> c = new ArrayList<>();
        List<long[]> two = List.of(s(4, 8), s(4, 8));
        List<List<Placement>> sameShapeBinary = List.of(p(R, R), p(S0, S0), p(S1, S1));
        c.add(new Case("add", two, ScalarType.Float, concat(sameShapeBinary, List.of(p(P, P))),
            in -> in.get(0).add(in.get(1)), in -> in.get(0).add(in.get(1))));
        c.add(new Case("sub", two, ScalarType.Float, concat(sameShapeBinary, List.of(p(P, P))),
            in -> in.get(0).sub(in.get(1)), in -> in.get(0).sub(in.get(1))));
        c.add(new Case("mul", two, ScalarType.Float, concat(sameShapeBinary, List.of(p(P, R), p(R, P))),
            in -> in.get(0).mul(in.get(1)), in -> in.get(0).mul(in.get(1))));
        c.add(new Case("div", two, ScalarType.Float, concat(sameShapeBinary, List.of(p(P, R))), in -> in.get(0).div(in.get(1).exp()),
            in -> {
                try (Tensor e = in.get(1).exp()) {
                    return in.get(0).div(e);
                }
            }));
        c.add(new Case("add broadcast row", List.of(s(4, 8), s(8)), ScalarType.Float, List.of(p(R, R), p(S0, R)),
            in -> in.get(0).add(in.get(1)), in -> in.get(0).add(in.get(1))));
        c.add(new Case("mul broadcast column", List.of(s(4, 8), s(4, 1)), ScalarType.Float, List.of(p(R, R), p(S1, R), p(S0, S0)),
            in -> in.get(0).mul(in.get(1)), in -> in.get(0).mul(in.get(1))));
        c.add(new Case("add uneven", List.of(s(5, 7), s(5, 7)), ScalarType.Long, List.of(p(S0, S0), p(S1, S1), p(P, P)),
            in -> in.get(0).add(in.get(1)), in -> in.get(0).add(in.get(1))));
        List<long[]> one = List.of(s(4, 8));
        List<List<Placement>> any = List.of(p(R), p(S0), p(S1));
        c.add(new Case("add scalar", one, ScalarType.Float, any, in -> in.get(0).add(1.5), in -> in.get(0).add(new org.bytedeco.pytorch.Scalar(1.5))));
        c.add(new Case("sub scalar", one, ScalarType.Long, any, in -> in.get(0).sub(3L), in -> in.get(0).sub(new org.bytedeco.pytorch.Scalar(3L))));
        c.add(new Case("rsub scalar", one, ScalarType.Float, any, in -> in.get(0).rsub(2.0), in -> {
            try (Tensor n = in.get(0).neg()) {
                return n.add(new org.bytedeco.pytorch.Scalar(2.0));
            }
        }));
        c.add(new Case("mul scalar", one, ScalarType.Float, concat(any, List.of(p(P))),
            in -> in.get(0).mul(-2.0), in -> in.get(0).mul(new org.bytedeco.pytorch.Scalar(-2.0))));
        c.add(new Case("div scalar", one, ScalarType.Float, concat(any, List.of(p(P))),
            in -> in.get(0).div(4.0), in -> in.get(0).div(new org.bytedeco.pytorch.Scalar(4.0))));
        c.add(new Case("rdiv scalar", one, ScalarType.Float, any, in -> in.get(0).exp().rdiv(1.0), in -> {
            try (Tensor e = in.get(0).exp()) {
                return e.reciprocal();
            }
        }));
        c.add(new Case("neg", one, ScalarType.Float, concat(any, List.of(p(P))), in -> in.get(0).neg(), in -> in.get(0).neg()));
        c.add(new Case("relu", one, ScalarType.Float, any, in -> in.get(0).relu(), in -> in.get(0).relu()));
        c.add(new Case("silu", one, ScalarType.Float, any, in -> in.get(0).silu(), in -> torch.silu(in.get(0))));
        c.add(new Case("gelu", one, ScalarType.Float, any, in -> in.get(0).gelu(), in -> torch.gelu(in.get(0))));
        c.add(new Case("exp", one, ScalarType.Float, any, in -> in.get(0).exp(), in -> in.get(0).exp()));
        c.add(new Case("tanh", one, ScalarType.Float, any, in -> in.get(0).tanh(), in -> in.get(0).tanh()));
        c.add(new Case("sigmoid", one, ScalarType.Float, any, in -> in.get(0).sigmoid(), in -> in.get(0).sigmoid()));
        c.add(new Case("matmul", List.of(s(4, 8), s(8, 4)), ScalarType.Float,
            List.of(p(R, R), p(S0, R), p(R, S1), p(S1, S0), p(P, R), p(R, P)), in -> in.get(0).matmul(in.get(1)), in -> torch.matmul(in.get(0), in.get(1))));
        c.add(new Case("matmul batched", List.of(s(4, 4, 8), s(4, 8, 4)), ScalarType.Float,
            List.of(p(R, R), p(S0, S0), p(S1, R), p(R, S2), p(S2, S1)), in -> in.get(0).matmul(in.get(1)), in -> torch.matmul(in.get(0), in.get(1))));
        c.add(new Case("linear", List.of(s(4, 8), s(12, 8), s(12)), ScalarType.Float,
            List.of(p(R, R, R), p(S0, R, R), p(R, S0, S0), p(S1, S1, R), p(P, R, R)),
            in -> dt.linear(in.get(0), in.get(1), in.get(2)), in -> torch.linear(in.get(0), in.get(1), new org.bytedeco.pytorch.TensorOptional(in.get(2)))));
        c.add(new Case("linear without bias", List.of(s(4, 8), s(12, 8)), ScalarType.Float,
            List.of(p(R, R), p(S0, R), p(R, S0), p(S1, S1), p(P, R)), in -> dt.linear(in.get(0), in.get(1)), in -> torch.linear(in.get(0), in.get(1))));
        c.add(new Case("sum dim 1", one, ScalarType.Float, concat(any, List.of(p(P))), in -> in.get(0).sum(1), in -> in.get(0).sum(1)));
        c.add(new Case("sum dim 0 keepdim", one, ScalarType.Long, concat(any, List.of(p(P))), in -> in.get(0).sum(new int[] {0}, true),
            in -> in.get(0).sum(new long[] {0}, true, new org.bytedeco.pytorch.ScalarTypeOptional(ScalarType.Long))));
        c.add(new Case("sum all", one, ScalarType.Float, concat(any, List.of(p(P))), in -> in.get(0).sum(), in -> in.get(0).sum()));
        c.add(new Case("mean dim 0", one, ScalarType.Float, concat(any, List.of(p(P))), in -> in.get(0).mean(0), in -> in.get(0).mean(0)));
        c.add(new Case("mean all", List.of(s(5, 7)), ScalarType.Float, List.of(p(R), p(S0), p(S1), p(P)), in -> in.get(0).mean(), in -> in.get(0).mean()));
        c.add(new Case("max dim 1", one, ScalarType.Float, any, in -> in.get(0).max(1), in -> in.get(0).amax(new long[] {1}, false)));
        c.add(new Case("max all", List.of(s(5, 7)), ScalarType.Float, any, in -> in.get(0).max(), in -> in.get(0).amax()));
        c.add(new Case("softmax", one, ScalarType.Float, List.of(p(R), p(S0)), in -> in.get(0).softmax(1), in -> in.get(0).softmax(1)));
        c.add(new Case("transpose", one, ScalarType.Float, concat(any, List.of(p(P))),
            in -> in.get(0).transpose(0, 1), in -> in.get(0).transpose(0, 1).contiguous()));
        c.add(new Case("permute", List.of(s(4, 2, 8)), ScalarType.Float, List.of(p(R), p(S0), p(S2), p(P)), in -> in.get(0).permute(2, 0, 1),
            in -> in.get(0).permute(2, 0, 1).contiguous()));
        c.add(new Case("reshape keeps the sharded dim", one, ScalarType.Float, List.of(p(R), p(S0), p(P)), in -> in.get(0).reshape(4, 2, 4),
            in -> in.get(0).reshape(4, 2, 4)));
        c.add(new Case("view flatten", one, ScalarType.Float, List.of(p(R), p(P)), in -> in.get(0).view(-1), in -> in.get(0).reshape(-1)));
        c.add(new Case("narrow", one, ScalarType.Float, List.of(p(R), p(S0), p(P)),
            in -> in.get(0).narrow(1, 2, 4), in -> in.get(0).narrow(1, 2, 4).contiguous()));
        c.add(new Case("cat", List.of(s(4, 8), s(4, 3)), ScalarType.Float, List.of(p(R, R), p(S0, S0), p(P, P)), in -> dt.cat(in, 1), OperatorsTest::torchCat));
        c.add(new Case("to int64", List.of(s(5, 7)), ScalarType.Long, List.of(p(R), p(S0), p(S1), p(P)), in -> in.get(0).to(ScalarType.Double),
            in -> in.get(0).to(ScalarType.Double)));
        c.add(new Case("copy_", two, ScalarType.Float, List.of(p(R, R), p(S0, R), p(S1, S0), p(R, S1), p(P, R), p(R, P)),
            in -> in.get(0).copy_(in.get(1)), in -> in.get(1).clone()));
        c.add(new Case("redistribute", one, ScalarType.Float, concat(any, List.of(p(P))), in -> in.get(0).redistribute(S1),
            in -> in.get(0).clone()));
        return c;
    }

    private static Tensor torchCat(List<Tensor> in) {
        try (TensorVector v = new TensorVector(in.toArray(Tensor[]::new)); TensorArrayRef ref = new TensorArrayRef(v)) {
            return torch.cat(ref, 1);
        }
    }

    @SafeVarargs
    private static List<List<Placement>> concat(List<List<Placement>>... lists) {
        List<List<Placement>> all = new ArrayList<>();
        for (List<List<Placement>> l : lists) {
            all.addAll(l);
        }
        return all;
    }

    @TestFactory
    List<DynamicTest> everyOperatorAgainstTorch() {
        List<DynamicTest> tests = new ArrayList<>();
        for (int devices : new int[] {1, 2, 4}) {
            DeviceMesh mesh = DeviceMesh.initDeviceMesh(dt.deviceKind(), new int[] {devices}, List.of());
            for (Case c : cases()) {
                tests.add(DynamicTest.dynamicTest(c.name() + " on " + devices + " devices", () -> check(c, mesh)));
            }
        }
        return tests;
    }

    private static void check(Case c, DeviceMesh mesh) {
        List<String> failures = new ArrayList<>();
        List<Tensor> references = new ArrayList<>();
        for (int i = 0; i < c.shapes().size(); i++) {
            references.add(reference(c.shapes().get(i), c.dtype(), 11 + i));
        }
        try (Tensor expected = c.torchOp().apply(references)) {
            for (List<Placement> placements : c.accepted()) {
                List<DTensor> inputs = new ArrayList<>();
                for (int i = 0; i < references.size(); i++) {
                    inputs.add(distribute(references.get(i), mesh, placements.get(i)));
                }
                DTensor result = c.op().apply(inputs);
                try (Tensor actual = result.toTorch()) {
                    String problem = compare(expected, actual);
                    if (!Arrays.equals(TorchTensors.shape(expected), result.shape()) || TorchTensors.dtype(expected) != result.dtype()) {
                        problem = "metadata " + result.meta() + " but torch gives " + TorchTensors.describe(expected);
                    }
                    if (problem != null) {
                        failures.add(placements + " -> " + result.placements() + ": " + problem);
                    }
                }
                inputs.forEach(DTensor::close);
                result.close();
            }
        } finally {
            references.forEach(Tensor::close);
        }
        assertEquals(List.of(), failures, c.name() + " on " + mesh);
    }

    /** A distributed copy of {@code full}; partial placements come from redistributing a replicated copy. */
    static DTensor distribute(Tensor full, DeviceMesh mesh, Placement placement) {
        if (!placement.isPartial()) {
            return dt.tensor(full, mesh, placement);
        }
        try (DTensor replicated = dt.tensor(full, mesh, R)) {
            return replicated.redistribute(placement);
        }
    }

    static Tensor reference(long[] shape, ScalarType dtype, long seed) {
        try (Generator g = torch.make_generator_cpu(seed); Tensor r = torch.randn(shape, new GeneratorOptional(g))) {
            if (dtype == ScalarType.Long) {
                try (Tensor scaled = r.mul(new org.bytedeco.pytorch.Scalar(10.0))) {
                    return scaled.to(ScalarType.Long);
                }
            }
            return r.to(dtype);
        }
    }

    static String compare(Tensor expected, Tensor actual) {
        if (!Arrays.equals(TorchTensors.shape(expected), TorchTensors.shape(actual))) {
            return "shape " + TorchTensors.describe(actual) + ", expected " + TorchTensors.describe(expected);
        }
        boolean ok = Rules.isFloating(TorchTensors.dtype(expected))
            ? torch.allclose(expected, actual.to(TorchTensors.dtype(expected)), 1e-4, 1e-5, false)
            : expected.equal(actual);
        return ok ? null : "values " + TorchTensors.format(actual, 12) + " expected " + TorchTensors.format(expected, 12);
    }
}
