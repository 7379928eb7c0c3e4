package org.dtorch.ops;

import java.time.Duration;
import org.bytedeco.pytorch.Tensor;
import org.dtorch.api.DTensor;
import org.dtorch.api.DTorch;
import org.dtorch.api.DTorchOptions;
import org.dtorch.core.communication.store.RendezvousAddress;
import org.dtorch.core.distributed.Placement;
import org.dtorch.core.runtime.process.ClusterToken;
import org.dtorch.core.runtime.process.NodeSpec;

/**
 * Node 0 of a run across two nodes in a JVM of its own, for tests that kill the controller: {@code PORT PER_NODE}; the
 * token in {@value ClusterToken#ENV}. Prints {@code ready INSTANCE} once a collective across the nodes ran, then waits to
 * be killed.
 */
public final class NodeZeroChild {

    private NodeZeroChild() {
    }

    public static void main(String[] args) throws InterruptedException {
        int port = Integer.parseInt(args[0]);
        int perNode = Integer.parseInt(args[1]);
        NodeSpec spec = new NodeSpec(2, 0, new RendezvousAddress("127.0.0.1", port), ClusterToken.resolve(2, null, System.getenv())
            .orElseThrow(), perNode);
        DTorch dt = DTorch.init(DTorchOptions.builder().nodes(spec).timeout(Duration.ofSeconds(60)).build());
        DTensor x = dt.ones(new long[] {4, 2}, dt.defaultMesh(), Placement.shard(0));
        try (Tensor sum = x.redistribute(Placement.replicate()).sum().toTorch()) {
            System.out.println("ready " + dt.runtime().instanceId() + " " + sum.item_double());
        }
        Thread.sleep(Duration.ofMinutes(5)); // a controller that stays up: the test kills it here
    }
}
