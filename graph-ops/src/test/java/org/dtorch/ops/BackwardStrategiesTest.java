package org.dtorch.ops;

import static org.dtorch.ops.GenericOpsTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.Supplier;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.api.DTensor;
import org.dtorch.core.communication.group.CollectiveKind;
import org.dtorch.core.distributed.DeviceMesh;
import org.dtorch.core.distributed.Placement;
import org.dtorch.ops.aten.AtenCall;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The strategies of the operators a data-parallel backward issues ({@link LossStrategy}, {@link IndexAddStrategy},
 * {@link AlongDimStrategy}) against the same call on one device's whole tensors, on random placements (uneven and
 * empty shards, partial values) of a line of four devices and a 2 x 2 grid; and a data-parallel language-model step
 * whose backward gathers nothing and falls back nowhere.
 */
@Timeout(600)
class BackwardStrategiesTest extends FourDeviceRuntime {
    private static final long IGNORE = -100;

    /** One case: the call and a maker of fresh whole inputs (float inputs may be made partial, integer ones not). */
    private record Case(AtenCall call, Supplier<List<Tensor>> inputs) {
    }

    /** Class indices in [0, classes), a quarter of them the ignored index. */
    private static Tensor targets(long classes, long... shape) {
        Tensor t = torch.randint(0, classes, shape);
        try (Tensor u = torch.rand(shape); Scalar quarter = new Scalar(0.25); Tensor ignored = u.lt(quarter); Scalar skip = new Scalar(IGNORE)) {
            return t.masked_fill(ignored, skip);
        }
    }

    private static List<Case> cases() {
        List<Case> cs = new ArrayList<>();
        for (long reduction : new long[] {0, 1, 2}) {
            cs.add(new Case(call("nll_loss_forward", "T,T,n,i,i", null, null, null, reduction, IGNORE),
                () -> List.of(torch.randn(6, 5), targets(5, 6))));
            cs.add(new Case(call("nll_loss_forward", "T,T,T,i,i", null, null, null, reduction, IGNORE),
                () -> List.of(torch.randn(3, 4), targets(4, 3), torch.rand(4))));
            cs.add(new Case(call("nll_loss2d", "T,T,n,i,i", null, null, null, reduction, IGNORE),
                () -> List.of(torch.randn(3, 4, 5, 2), targets(4, 3, 5, 2))));
            cs.add(new Case(call("nll_loss_nd", "T,T,T,i,i", null, null, null, reduction, IGNORE),
                () -> List.of(torch.randn(5, 3, 6), targets(3, 5, 6), torch.rand(3))));
            cs.add(new Case(call("cross_entropy_loss", "T,T,n,i,i,f", null, null, null, reduction, IGNORE, 0.0),
                () -> List.of(torch.randn(7, 5), targets(5, 7))));
            cs.add(new Case(call("cross_entropy_loss", "T,T,T,i,i,f", null, null, null, reduction, IGNORE, 0.1),
                () -> List.of(torch.randn(5, 4, 3), targets(4, 5, 3), torch.rand(4))));
            cs.add(new Case(call("cross_entropy_loss", "T,T,n,i,i,f", null, null, null, reduction, IGNORE, 0.0),
                () -> List.of(torch.randn(6, 5), torch.softmax(torch.randn(6, 5), 1))));
            cs.add(new Case(call("nll_loss_backward", "T,T,T,n,i,i,T", null, null, null, null, reduction, IGNORE, null),
                () -> {
                    Tensor x = torch.randn(6, 5);
                    Tensor t = targets(5, 6);
                    Tensor total = total(x, t, null, reduction);
                    return List.of(reduction == 0 ? torch.randn(6) : torch.randn(), x, t, total);
                }));
            cs.add(new Case(call("nll_loss2d_backward", "T,T,T,T,i,i,T", null, null, null, null, reduction, IGNORE, null),
                () -> {
                    Tensor x = torch.randn(3, 4, 5, 2);
                    Tensor t = targets(4, 3, 5, 2);
                    Tensor w = torch.rand(4);
                    Tensor total = total(x, t, w, reduction);
                    return List.of(reduction == 0 ? torch.randn(3, 5, 2) : torch.randn(), x, t, w, total);
                }));
        }
        cs.add(new Case(call("index_add", "T,i,T,T", null, 0L, null, null),
            () -> List.of(torch.zeros(7, 3), torch.randint(0, 7, new long[] {9}), torch.randn(9, 3))));
        cs.add(new Case(call("index_add", "T,i,T,T|alpha=f", null, 1L, null, null, 0.5),
            () -> List.of(torch.randn(4, 5, 2), torch.randint(0, 5, new long[] {6}), torch.randn(4, 6, 2))));
        cs.add(new Case(call("slice_backward", "T,[i],i,i,i,i", null, List.of(6L, 9L), 1L, 1L, 8L, 3L), () -> List.of(torch.randn(6, 3))));
        cs.add(new Case(call("slice_backward", "T,[i],i,i,i,i", null, List.of(10L, 5L), 0L, 0L, 10L, 2L), () -> List.of(torch.randn(5, 5))));
        for (boolean keepdim : new boolean[] {false, true}) {
            cs.add(new Case(call("value_selecting_reduction_backward", "T,i,T,[i],b", null, 1L, null, List.of(5L, 4L, 3L), keepdim),
                () -> {
                    long[] reduced = keepdim ? new long[] {5, 1, 3} : new long[] {5, 3};
                    return List.of(torch.randn(reduced), torch.randint(0, 4, reduced));
                }));
        }
        cs.add(new Case(call("index_select_backward", "T,[i],i,T", null, List.of(5L, 7L), 1L, null),
            () -> List.of(torch.randn(5, 9), torch.randint(0, 7, new long[] {9}))));
        cs.add(new Case(call("cumsum", "T,i", null, 1L), () -> List.of(torch.randn(5, 6, 3))));
        cs.add(new Case(call("cumsum", "T,i", null, -1L), () -> List.of(torch.randn(7, 4))));
        cs.add(new Case(call("cumprod", "T,i", null, 0L), () -> List.of(torch.randn(4, 6))));
        return cs;
    }

    /** The total weight one device's {@code nll_loss_forward} gives for the whole batch. */
    private static Tensor total(Tensor x, Tensor t, Tensor w, long reduction) {
        AtenCall forward = w == null ? call(x.dim() == 4 ? "nll_loss2d_forward" : "nll_loss_forward", "T,T,n,i,i", null, null, null, reduction, IGNORE)
            : call(x.dim() == 4 ? "nll_loss2d_forward" : "nll_loss_forward", "T,T,T,i,i", null, null, null, reduction, IGNORE);
        List<Tensor> out = forward.call(w == null ? List.of(x, t) : List.of(x, t, w));
        out.getFirst().close();
        return out.get(1);
    }

    /** Every case on random placements over each mesh, {@code rounds} times; the failures' descriptions. */
    private static List<String> walk(int rounds, long seed) {
        Random random = new Random(seed);
        List<String> failures = new ArrayList<>();
        for (Case c : cases()) {
            assertNotEquals("replicate", StrategyTable.of(c.call()).family(), c.call() + " has a strategy of its own");
            for (int round = 0; round < rounds; round++) {
                for (int[] shape : new int[][] {{4}, {2, 2}}) {
                    DeviceMesh mesh = dt.initDeviceMesh(shape);
                    List<Tensor> whole = c.inputs().get();
                    List<DTensor> inputs = new ArrayList<>();
                    try {
                        for (Tensor t : whole) {
                            inputs.add(AutogradOpsTest.distribute(t, mesh, random, torch.isFloatingType(t.scalar_type())));
                        }
                        GenericOpsTest.assertLikeTorch(dt, c.call(), whole, inputs, shape);
                    } catch (AssertionError | RuntimeException e) {
                        failures.add(c.call() + " on " + inputs.stream().map(DTensor::placements).toList() + ": " + e.getMessage());
                    } finally {
                        inputs.forEach(DTensor::close);
                        whole.forEach(Tensor::close);
                    }
                }
            }
        }
        return failures;
    }

    @Test
    void shouldRunTheBackwardOperatorsLikeTorchOnRandomPlacements() {
        assertEquals(List.of(), walk(2, 31));
    }

    @Test
    @Tag("slow")
    void shouldRunTheBackwardOperatorsLikeTorchOnManyRandomPlacements() {
        assertEquals(List.of(), walk(25, 32));
    }

    @Test
    void shouldKeepTheBatchShardThroughTheLossAndItsDerivative() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        Placement s0 = Placement.shard(0);
        for (long reduction : new long[] {0, 1, 2}) {
            AtenCall forward = call("nll_loss_forward", "T,T,n,i,i", null, null, null, reduction, IGNORE);
            try (Tensor x = torch.randn(10, 5); Tensor t = targets(5, 10)) {
                List<DTensor> out = dt.aten(forward, dt.tensor(x, line, s0), dt.tensor(t, line, s0));
                Placement expected = reduction == 0 ? s0 : Placement.partial();
                assertEquals(List.of(expected), out.getFirst().placements(), "the loss of batch-sharded rows, reduction " + reduction);
                assertEquals(List.of(reduction == 1 ? Placement.replicate() : Placement.partial()), out.get(1).placements(),
                    "the total weight, reduction " + reduction);
            }
        }
        // Classes split (as loss parallelism keeps the logits): each device picks the targets among its classes.
        Placement s1 = Placement.shard(1);
        for (long reduction : new long[] {0, 1, 2, 10, 11, 12}) {
            long classes = reduction < 10 ? 7 : 3; // 3 classes over 4 devices: one holds none
            AtenCall forward = call("nll_loss_nd", "T,T,T,i,i", null, null, null, reduction % 10, 1L);
            AtenCall backward = call("nll_loss_backward", "T,T,T,T,i,i,T", null, null, null, null, reduction % 10, 1L, null);
            try (Tensor x = torch.randn(6, classes); Tensor t = torch.randint(0, classes, new long[] {6}); Tensor w = torch.rand(classes);
                 Tensor g = reduction % 10 == 0 ? torch.randn(6) : torch.randn(); Tensor total = total(x, t, w, reduction % 10);
                 Tensor wantLoss = forward.call(List.of(x, t, w)).getFirst(); Tensor wantGrad = backward.call(List.of(g, x, t, w, total)).getFirst()) {
                DTensor loss = dt.aten(forward, dt.tensor(x, line, s1), dt.tensor(t, line, Placement.replicate()),
                    dt.tensor(w, line, Placement.replicate())).getFirst();
                assertEquals(List.of(Placement.partial()), loss.placements(), "the loss over split classes, reduction " + reduction);
                DTensor grad = dt.aten(backward, dt.tensor(g, line, Placement.replicate()), dt.tensor(x, line, s1),
                    dt.tensor(t, line, Placement.replicate()), dt.tensor(w, line, Placement.replicate()),
                    dt.tensor(total, line, Placement.replicate())).getFirst();
                assertEquals(List.of(s1), grad.placements(), "the gradient over split classes, reduction " + reduction);
                try (Tensor gotLoss = loss.toTorch(); Tensor gotGrad = grad.toTorch()) {
                    assertEquals(true, torch.allclose(gotLoss, wantLoss, 1e-5, 1e-6, false), "loss, reduction " + reduction);
                    assertEquals(true, torch.allclose(gotGrad, wantGrad, 1e-5, 1e-6, false), "gradient, reduction " + reduction);
                }
            }
        }
        AtenCall index = call("index_add", "T,i,T,T", null, 0L, null, null);
        try (Tensor w = torch.zeros(11, 3); Tensor i = torch.randint(0, 11, new long[] {8}); Tensor rows = torch.randn(8, 3)) {
            DTensor grad = dt.aten(index, dt.tensor(w, line, Placement.replicate()), dt.tensor(i, line, s0), dt.tensor(rows, line, s0)).getFirst();
            assertEquals(List.of(Placement.partial()), grad.placements(), "each device adds its own rows into a partial weight gradient");
            DTensor rowGrad = dt.aten(index, dt.tensor(w, line, s0), dt.tensor(i, line, Placement.replicate()),
                dt.tensor(rows, line, Placement.replicate())).getFirst();
            assertEquals(List.of(s0), rowGrad.placements(), "a vocabulary-parallel weight gradient keeps its rows");
            try (Tensor got = rowGrad.toTorch(); Tensor want = index.call(List.of(w, i, rows)).getFirst()) {
                assertEquals(true, torch.allclose(got, want), "the row-sharded weight gradient");
            }
        }
    }

    @Test
    void shouldRunADataParallelLanguageModelBackwardWithoutGatheringOrFallingBack() {
        DeviceMesh line = dt.initDeviceMesh(new int[] {4});
        Placement r = Placement.replicate();
        Placement s0 = Placement.shard(0);
        AtenCall embedding = call("embedding", "T,T", null, null);
        AtenCall crossEntropy = call("cross_entropy_loss", "T,T,n,i,i,f", null, null, null, 1L, IGNORE, 0.0);
        try (Tensor tokens = torch.randint(0, 13, new long[] {8, 6}); Tensor next = targets(13, 8, 6); Tensor table = torch.randn(13, 5);
             Tensor head = torch.randn(13, 5)) {
            DTensor dTable = dt.tensor(table, line, r).requiresGrad_(true);
            DTensor dHead = dt.tensor(head, line, r).requiresGrad_(true);
            DTensor hidden = dt.aten(embedding, dTable, dt.tensor(tokens, line, s0)).getFirst();
            DTensor logits = dt.aten(call("linear", "T,T", null, null), hidden, dHead).getFirst();
            DTensor loss = dt.aten(crossEntropy, logits.reshape(-1, 13), dt.tensor(next, line, s0).reshape(-1)).getFirst();
            dt.sync();
            Set<String> warnedBefore = new HashSet<>(FallbackWarnings.warned());
            Map<CollectiveKind, Long> before = dt.runtime().groups().collectiveCounter().snapshot();
            loss.backward();
            dt.sync();
            Map<CollectiveKind, Long> after = dt.runtime().groups().collectiveCounter().snapshot();
            assertEquals(before.getOrDefault(CollectiveKind.ALL_GATHER, 0L), after.getOrDefault(CollectiveKind.ALL_GATHER, 0L),
                "the backward of a batch-sharded model gathers nothing");
            Set<String> warned = new HashSet<>(FallbackWarnings.warned());
            warned.removeAll(warnedBefore);
            assertEquals(Set.of(), warned, "no backward operator falls back to replicated inputs");
            assertEquals(List.of(r), dTable.grad().placements());

            Tensor t = table.detach().requires_grad_(true);
            Tensor h = head.detach().requires_grad_(true);
            Tensor want = crossEntropy.call(List.of(torch.linear(torch.embedding(t, tokens), h).reshape(-1, 13), next.reshape(-1))).getFirst();
            want.backward();
            try (Tensor got = dTable.grad().toTorch(); Tensor gotHead = dHead.grad().toTorch(); Tensor value = loss.toTorch()) {
                assertEquals(true, torch.allclose(value, want.detach(), 1e-5, 1e-6, false), "the mean loss over every device's rows");
                assertEquals(true, torch.allclose(got, t.grad(), 1e-4, 1e-5, false), "the embedding's weight gradient");
                assertEquals(true, torch.allclose(gotHead, h.grad(), 1e-4, 1e-5, false), "the head's weight gradient: " + Arrays.toString(
                    gotHead.sizes().vec().get()));
            }
        }
    }
}
