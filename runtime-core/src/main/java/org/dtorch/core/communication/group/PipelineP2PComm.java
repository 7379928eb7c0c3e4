package org.dtorch.core.communication.group;

import java.util.List;
import java.util.Objects;
import org.bytedeco.pytorch.Tensor;

/**
 * Point-to-point between neighbouring stages of a pipeline, over one rank's {@link ThreadGroup} (the PP group of a
 * {@link org.dtorch.core.distributed.ParallelConfig}; TeleFuser's {@code PipelineP2PComm}): the group's rank is the
 * stage, activations go forward from stage {@code s} to {@code s + 1} and gradients backward from {@code s + 1} to
 * {@code s}.
 *
 * <pre>
 *   stage 0  --sendForward-->  recvForward  stage 1  --sendForward-->  recvForward  stage 2
 *   stage 0  <--recvBackward-  sendBackward stage 1  <--recvBackward-  sendBackward stage 2
 * </pre>
 *
 * <p>Each call blocks: a {@link ThreadGroup#send} or {@link ThreadGroup#recv}, or for the combined forms one batch of
 * both; the receiver passes a tensor of the sent dtype and shape (the pipeline's schedule knows them). A call with no
 * neighbour in its direction (a forward send from the last stage, a forward receive on the first, and their backward
 * mirrors) fails with an {@link IllegalStateException} naming the stage before communicating.
 *
 * <p>Not thread-safe: one thread per stage, as its group; a send and its receive are issued in the same order on both
 * stages (an unmatched call is a deadlock the group's deadline turns into an error naming the peer and the shape).
 */
public final class PipelineP2PComm {
    private final ThreadGroup group;

    /** The pipeline communication of {@code group}'s rank, its stage; the group stays owned by the caller. */
    public PipelineP2PComm(ThreadGroup group) {
        this.group = Objects.requireNonNull(group, "group");
    }

    /** The group the transfers run on. */
    public ThreadGroup group() {
        return group;
    }

    /** This rank's stage, in {@code [0, numStages())}. */
    public int stage() {
        return group.getRank();
    }

    /** The number of stages, the group's size. */
    public int numStages() {
        return group.getWorldSize();
    }

    /** True on stage 0, which has no previous stage. */
    public boolean isFirstStage() {
        return stage() == 0;
    }

    /** True on the last stage, which has no next stage. */
    public boolean isLastStage() {
        return stage() == numStages() - 1;
    }

    /** Sends {@code tensor} (activations) to the next stage; blocks until it has taken it. */
    public void sendForward(Tensor tensor) {
        group.send(tensor, next("sendForward"));
    }

    /** Receives into {@code into} the activations the previous stage sends. */
    public void recvForward(Tensor into) {
        group.recv(into, previous("recvForward"));
    }

    /** Sends {@code tensor} (gradients) to the previous stage; blocks until it has taken it. */
    public void sendBackward(Tensor tensor) {
        group.send(tensor, previous("sendBackward"));
    }

    /** Receives into {@code into} the gradients the next stage sends. */
    public void recvBackward(Tensor into) {
        group.recv(into, next("recvBackward"));
    }

    /**
     * Sends {@code tensor} (activations) to the next stage and receives into {@code into} the gradients it sends, in one
     * {@link ThreadGroup#batchIsendIrecv} (the steady state of a one-forward-one-backward schedule); the next stage calls
     * {@link #sendBackwardRecvForward}.
     */
    public void sendForwardRecvBackward(Tensor tensor, Tensor into) {
        int peer = next("sendForwardRecvBackward");
        group.batchIsendIrecv(List.of(P2POp.isend(tensor, peer), P2POp.irecv(into, peer))).await();
    }

    /**
     * Sends {@code tensor} (gradients) to the previous stage and receives into {@code into} the activations it sends, in
     * one {@link ThreadGroup#batchIsendIrecv}; the previous stage calls {@link #sendForwardRecvBackward}.
     */
    public void sendBackwardRecvForward(Tensor tensor, Tensor into) {
        int peer = previous("sendBackwardRecvForward");
        group.batchIsendIrecv(List.of(P2POp.isend(tensor, peer), P2POp.irecv(into, peer))).await();
    }

    private int next(String op) {
        if (isLastStage()) {
            throw new IllegalStateException(where(op) + ": the last stage has no next stage");
        }
        return stage() + 1;
    }

    private int previous(String op) {
        if (isFirstStage()) {
            throw new IllegalStateException(where(op) + ": the first stage has no previous stage");
        }
        return stage() - 1;
    }

    private String where(String op) {
        return "PipelineP2PComm." + op + " (stage " + stage() + " of " + numStages() + ")";
    }
}
