package org.dtorch.core.communication.group;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.dtorch.core.device.DeviceKind;
import org.dtorch.core.testing.RankThreads;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The result cache hands a buffer out again only when the caller closed every view of it. */
@Timeout(120)
class ResultBufferCacheTest {
    private static final long ONE_MIB_FLOATS = 1L << 18;

    @Test
    void shouldReuseABufferOnlyAfterTheCallerClosedIt() {
        try (ResultBufferCache cache = new ResultBufferCache(8L << 20); Tensor like = torch.ones(ONE_MIB_FLOATS)) {
            Tensor first = cache.emptyLike(like);
            Tensor second = cache.emptyLike(like);
            assertFalse(first.is_alias_of(second), "a held result was handed out again");
            long base = first.data_ptr().address();
            first.close();
            try (Tensor third = cache.emptyLike(like)) {
                assertEquals(base, third.data_ptr().address(), "a closed result's buffer was not reused");
            }
            second.close();
        }
    }

    @Test
    void shouldNotReuseABufferWhileAViewOfItLives() {
        try (ResultBufferCache cache = new ResultBufferCache(8L << 20); Tensor like = torch.ones(ONE_MIB_FLOATS)) {
            Tensor first = cache.emptyLike(like);
            Tensor view = first.narrow(0, 0, 10);
            first.close();
            try (Tensor next = cache.emptyLike(like)) {
                assertFalse(next.is_alias_of(view), "the buffer behind a live view was handed out again");
            }
            view.close();
        }
    }

    @Test
    void shouldStayWithinItsBoundAndKeepDroppedResultsAlive() {
        try (ResultBufferCache cache = new ResultBufferCache(2L << 20); Tensor like = torch.ones(ONE_MIB_FLOATS);
             Scalar seven = new Scalar(7f)) {
            Tensor a = cache.emptyLike(like);
            Tensor b = cache.emptyLike(like);
            a.fill_(seven);
            Tensor c = cache.emptyLike(like); // over the bound: the cache drops a held buffer, a keeps its memory
            assertTrue(cache.cachedBytes() <= 2L << 20, cache.toString());
            try (Tensor min = a.min()) {
                assertEquals(7f, min.item_float());
            }
            a.close();
            b.close();
            c.close();
        }
    }

    @Test
    void shouldRejectANegativeBound() {
        assertThrows(IllegalArgumentException.class, () -> new ResultBufferCache(-1));
    }

    @Test
    void shouldGiveGlooResultsThatLaterCallsDoNotOverwrite() {
        int world = 2;
        try (ThreadGroupManager manager = GroupFixtures.manager(GroupFixtures.Backend.GLOO, Duration.ofSeconds(30))) {
            List<Long> ids = GroupFixtures.ids(world);
            List<String> failures = RankThreads.run(world, Duration.ofSeconds(60), rank -> {
                ThreadGroup group = manager.getThreadGroup(DeviceKind.CPU, ids, rank);
                try (Tensor one = torch.ones(ONE_MIB_FLOATS); Scalar three = new Scalar(3f); Tensor x = one.mul(three)) {
                    Tensor kept = group.allReduce(one);      // 2 everywhere, held across the next calls
                    for (int i = 0; i < 3; i++) {
                        group.allReduce(x).close();          // 6 everywhere, closed: its buffer is reused
                    }
                    try (Tensor again = group.allReduce(x); Tensor min = kept.min(); Tensor max = kept.max();
                         Tensor againMin = again.min()) {
                        kept.close();
                        return min.item_float() == 2f && max.item_float() == 2f && againMin.item_float() == 6f ? ""
                            : "rank " + rank + ": held result " + min.item_float() + ".." + max.item_float() + ", later " + againMin.item_float();
                    }
                }
            });
            assertEquals(List.of("", ""), failures);
        }
    }
}
