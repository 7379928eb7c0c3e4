package org.dtorch.core.runtime.process;

import java.time.Duration;
import java.util.List;
import org.dtorch.core.communication.Deadline;
import org.dtorch.core.communication.FailureKind;
import org.dtorch.core.communication.promise.RemoteFailureException;
import org.dtorch.core.communication.store.RendezvousClient;
import org.dtorch.core.graph.Operand;
import org.dtorch.core.graph.Operator;
import org.dtorch.core.runtime.FailureRegistry;

/**
 * The failure registry of a worker in a run across nodes: its node's {@link SharedFailureBoard}, which the workers of one
 * host share, and the run's rendezvous, which every node reaches. A failure is recorded in both, the rendezvous first
 * (a numbered record, {@code <run>/failed/<n>}, and the count {@code <run>/failed}), before the device runs anything on
 * placeholder data; after a kernel that communicated, {@link #remoteFailure} reads the count (one round trip) and, when
 * it grew, copies the new records into the node's board. A peer on another node that received data from a failed
 * device always sees the record: the device wrote it before it sent anything.
 *
 * <p>Thread-safe: the board is; the count of records copied is guarded by this.
 */
final class NodeFailureBoard implements FailureRegistry {
    /** A counted record is written before the count grows: it is there at once; the bound only covers a broken store. */
    private static final Duration RECORD_WAIT = Duration.ofSeconds(10);
    private static final System.Logger LOG = System.getLogger(NodeFailureBoard.class.getName());

    private final SharedFailureBoard board;
    private final RendezvousClient rendezvous;
    private final String prefix;
    /** Records copied from the rendezvous so far. */
    private long seen;

    /** A board over {@code board} and the rendezvous of run {@code instanceId}; it owns both. */
    NodeFailureBoard(SharedFailureBoard board, RendezvousClient rendezvous, String instanceId) {
        this.board = board;
        this.rendezvous = rendezvous;
        this.prefix = instanceId + "/failed";
    }

    /**
     * Records the failure in the rendezvous, then on the board. A rendezvous that cannot be reached (node 0 is gone) is
     * logged: the run is ending, and the failure stays on this node.
     */
    @Override
    public void fail(long operandId, Throwable cause) {
        if (board.failure(operandId) == null) {
            try {
                long n = rendezvous.add(prefix + "/next", 1);
                rendezvous.set(prefix + "/" + n, operandId + "\t" + FailureKind.of(cause).ordinal() + "\t"
                    + RemoteFailureException.describe(cause));
                rendezvous.add(prefix, 1); // after the record: a reader of the count finds every record it counts
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "the failure of %" + operandId + " stays on this node: the rendezvous "
                    + rendezvous.address() + " failed: " + e.getMessage());
            }
        }
        board.fail(operandId, cause);
    }

    @Override
    public Throwable failure(long operandId) {
        return board.failure(operandId);
    }

    @Override
    public boolean anyFailure() {
        return board.anyFailure();
    }

    @Override
    public void forget(long operandId) {
        board.forget(operandId);
    }

    @Override
    public int size() {
        return board.size();
    }

    /** Copies the records other nodes published since the last call, then looks {@code op}'s operands up. */
    @Override
    public synchronized Throwable remoteFailure(Operator op) {
        long count = rendezvous.add(prefix, 0);
        for (long n = seen + 1; n <= count; n++) {
            String[] record = rendezvous.await(prefix + "/" + n, Deadline.after(RECORD_WAIT), "failure record " + n).split("\t", 3);
            long operandId = Long.parseLong(record[0]);
            if (board.failure(operandId) == null) {
                board.fail(operandId, new RemoteFailureException(FailureKind.fromOrdinal(Integer.parseInt(record[1])), record[2]));
            }
        }
        seen = Math.max(seen, count);
        if (count == 0) {
            return null;
        }
        for (List<Operand> operands : List.of(op.inputs(), op.outputs())) {
            for (Operand o : operands) {
                Throwable t = board.failure(o.id());
                if (t != null) {
                    return t;
                }
            }
        }
        return null;
    }

    @Override
    public void close() {
        board.close();
        rendezvous.close();
    }
}
